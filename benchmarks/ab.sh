#!/usr/bin/env bash
# Two builds side by side: fr_osu_allreduce and fr_osu_bcast of build A and
# of build B, launched alternately (A, B, A in each round) at each number of
# ranks, 4 B to MAX. Per size it prints the median latency of each build,
# B/A (the median over rounds of B over the mean of that round's two A
# launches) and the noise between identical launches (A's second launch
# over its first: the median and the largest deviation over rounds). A size
# where B/A - 1 exceeds that largest deviation is marked "slower".
# Usage: benchmarks/ab.sh BUILD_A BUILD_B [ROUNDS] [NP...]
#   (default 5 rounds, np 2 and 4; MAX=67108864 and ITERS=200 from the
#   environment; the builds' benchmarks/ folders hold the two programs;
#   ENV_B="VAR=VALUE ..." is set for B's launches only, so that one build
#   against itself measures a setting, FASTREDUCE_TIMELINE for one)
set -uo pipefail
[ $# -ge 2 ] || { sed -n '2,11p' "$0"; exit 2; }
a=$1; b=$2; rounds=${3:-5}; shift 2; shift || true
nps=("$@"); [ ${#nps[@]} -gt 0 ] || nps=(2 4)
max=${MAX:-67108864}; iters=${ITERS:-200}
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/scripts/env.sh"
. "$top/benchmarks/rounds.sh"
rounds_folder

envb=(); xb=()
for kv in ${ENV_B:-}; do envb+=("$kv"); xb+=(-x "${kv%%=*}"); done
launch() {  # BUILD COLL NP FILE [b]: one launch's "size latency" lines appended to FILE
    local e=() x=()
    [ "${5:-}" = b ] && { e=("${envb[@]}"); x=("${xb[@]}"); }
    env "${e[@]}" mpirun --oversubscribe "${x[@]}" -np "$3" "$1/benchmarks/fr_osu_$2" -m 4:"$max" -i "$iters" -x 20 \
        2>/dev/null | awk '$1 ~ /^[0-9]+$/ {print $1, $2}' >>"$4"
}
echo "# A: $a ($(git -C "$a/.." rev-parse --short HEAD 2>/dev/null || echo '?'))"
echo "# B: $b ($(git -C "$b/.." rev-parse --short HEAD 2>/dev/null || echo '?'))${ENV_B:+ with $ENV_B}"
echo "# $rounds rounds of A B A, sizes 4 to $max, -i $iters, $(date -u '+%Y-%m-%d %H:%M UTC')"
one_round() {  # NP COLL R
    launch "$a" "$2" "$1" "$out/$2.$1.a1.$3"
    launch "$b" "$2" "$1" "$out/$2.$1.b.$3" b
    launch "$a" "$2" "$1" "$out/$2.$1.a2.$3"
}
report() {  # NP COLL
    python3 - "$out" "$2" "$1" "$rounds" <<'EOF'
import statistics as st, sys
out, coll, np_, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
def read(kind, r):
    try:
        return {int(s): float(v) for s, v in (l.split() for l in open(f"{out}/{coll}.{np_}.{kind}.{r}"))}
    except OSError:
        return {}
runs = [(read("a1", r), read("b", r), read("a2", r)) for r in range(1, rounds + 1)]
sizes = sorted(set().union(*[set(x[1]) for x in runs]))
print(f"{'size':>10} {'A us':>10} {'B us':>10} {'B/A':>6} {'noise':>6} {'max':>6}")
slower = 0
for s in sizes:
    ok = [(a1[s], b[s], a2[s]) for a1, b, a2 in runs if s in a1 and s in b and s in a2]
    if not ok:
        continue
    ratio = st.median(b / ((x + y) / 2) for x, b, y in ok)
    dev = [max(y / x, x / y) - 1 for x, _, y in ok]
    mark = "slower" if ratio - 1 > max(dev) else ""
    slower += bool(mark)
    print(f"{s:>10} {st.median([x for x, _, y in ok] + [y for x, _, y in ok]):>10.2f} "
          f"{st.median(b for _, b, _ in ok):>10.2f} {ratio:>6.2f} {st.median(dev):>6.2f} {max(dev):>6.2f} {mark}")
print(f"# {coll} np={np_}: {slower} size(s) slower beyond the noise")
EOF
}
rounds_for_each "$rounds" one_round report "${nps[@]}"
