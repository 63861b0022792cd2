#!/usr/bin/env bash
# Zero-copy against the copy path and MPI, side by side: in each round,
# fr_osu_allreduce (then fr_osu_bcast) with --mem fr --vs-mpi (ours on
# fr_mem_alloc buffers, zero-copy; MPI's own collective on MPI_Alloc_mem
# buffers, alternating blocks) and with --mem malloc (ours on private
# buffers: the copy path), launched in turn. Per size: the median latency
# of each, and the medians over rounds of copy/zero-copy and MPI/zero-copy.
# The allreduce's largest size is also given against the time for every
# rank to memcpy the message at once (the traffic no allreduce avoids), the
# bcast's against one memcpy of it; both measured in each fr launch.
# Usage: benchmarks/zcopy.sh BUILD [ROUNDS] [NP...]
#   (default 5 rounds, np 2; MAX=67108864 from the environment; MPIEXEC and
#   MPIFLAGS for another MPI, default mpirun --oversubscribe --bind-to none)
set -uo pipefail
[ $# -ge 1 ] || { sed -n '2,15p' "$0"; exit 2; }
build=$1; rounds=${2:-5}; shift; shift || true
nps=("$@"); [ ${#nps[@]} -gt 0 ] || nps=(2)
max=${MAX:-67108864}
mpiexec=${MPIEXEC:-mpirun}
read -r -a flags <<<"${MPIFLAGS:---oversubscribe --bind-to none}"
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/scripts/env.sh"
. "$top/benchmarks/rounds.sh"
rounds_folder

launch() {  # COLL NP MEM FILE [ARGS...]: the launch's output in FILE
    local coll=$1 np=$2 mem=$3 file=$4
    shift 4
    "$mpiexec" "${flags[@]}" -np "$np" "$build/benchmarks/fr_osu_$coll" -m 4:"$max" --mem "$mem" "$@" \
        >"$file" 2>/dev/null
}
echo "# build: $build ($(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo '?')); $rounds rounds of" \
     "--mem fr --vs-mpi, --mem malloc; sizes 4 to $max; $(date -u '+%Y-%m-%d %H:%M UTC')"
one_round() {  # NP COLL R
    launch "$2" "$1" fr "$out/$2.$1.fr.$3" --vs-mpi
    launch "$2" "$1" malloc "$out/$2.$1.copy.$3" --vs-mpi
}
report() {  # NP COLL
    python3 - "$out" "$2" "$1" "$rounds" <<'EOF'
import re, statistics as st, sys
out, coll, np_, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
def read(kind, r):
    rows, bound = {}, None
    try:
        for line in open(f"{out}/{coll}.{np_}.{kind}.{r}"):
            f = line.split()
            if f and f[0].isdigit():
                rows[int(f[0])] = (float(f[1]), float(f[2]) if kind == "fr" else None, "zero-copy" in line)
            m = re.search(r"= ([0-9.]+) x (the memory-traffic bound|one memcpy)", line)
            if m:
                bound = float(m.group(1))
    except OSError:
        pass
    return rows, bound
runs = [(read("fr", r), read("copy", r)) for r in range(1, rounds + 1)]
sizes = sorted(set().union(*[set(f[0]) for f, _ in runs]))
print(f"{'size':>10} {'zero-copy us':>13} {'copy us':>10} {'MPI us':>10} {'copy/zc':>8} {'MPI/zc':>7}  path")
for s in sizes:
    ok = [(f[0][s], c[0][s]) for f, c in runs if s in f[0] and s in c[0]]
    if not ok:
        continue
    zc = [a[0] for a, _ in ok]; mpi = [a[1] for a, _ in ok]; cp = [b[0] for _, b in ok]
    path = "zero-copy" if all(a[2] for a, _ in ok) else "copy" if not any(a[2] for a, _ in ok) else "mixed"
    print(f"{s:>10} {st.median(zc):>13.2f} {st.median(cp):>10.2f} {st.median(mpi):>10.2f} "
          f"{st.median(b[0] / a[0] for a, b in ok):>8.2f} {st.median(a[1] / a[0] for a, _ in ok):>7.2f}  {path}")
b = [f[1] for f, _ in runs if f[1] is not None]
if b:
    what = "the memory-traffic bound (every rank copying it at once)" if coll == "allreduce" else "one memcpy of it"
    print(f"# largest size, zero-copy: {st.median(b):.2f} x {what} (median over {len(b)} launches; "
          f"{min(b):.2f}-{max(b):.2f})")
EOF
}
rounds_for_each "$rounds" one_round report "${nps[@]}"
