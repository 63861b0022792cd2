#!/usr/bin/env bash
# The tables of docs/performance.md, "Current figures": runs the measurements
# and prints each table in the document's markdown. Run it on a quiet machine,
# from the source tree, after scripts/build.sh openmpi (and mpich for the
# MPICH column).
#
# Usage: benchmarks/perf_tables.sh np NP [ROUNDS [OUTDIR]]
#            benchmarks/compare.sh NP, ROUNDS times in a row (default 3); each
#            cell is the median of the rounds' figures and of their speedups
#        benchmarks/perf_tables.sh hier [BUILD_DIR [OUTDIR]]
#            benchmarks/hier.sh (two faked nodes x 2 ranks, UCX on TCP)
#        benchmarks/perf_tables.sh setup [BUILD_DIR [REPS [LAUNCHES [OUTDIR]]]]
#            benchmarks/setup.sh LAUNCHES times (default 2); one figure a launch
#        benchmarks/perf_tables.sh --parse np|hier|setup FILE...
#            the tables of saved output of those scripts; runs nothing
# The raw output is kept in OUTDIR (default perf-<kind>-<date>/). The rows are
# the sizes in PERF_SIZES_ALLREDUCE, PERF_SIZES_BCAST and PERF_SIZES_HIER
# (bytes, K and M allowed); every size of the output counts for the summary
# line of the np tables.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
usage() { sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
: "${PERF_SIZES_ALLREDUCE:=4 64 1K 4K 8K 32K 128K 1M 2M 4M 16M 64M}"
: "${PERF_SIZES_BCAST:=4 8 2K 4K 64K 1M 4M 16M 64M}"
: "${PERF_SIZES_HIER:=4 16K 128K 1M 4M 8M 16M}"
export PERF_SIZES_ALLREDUCE PERF_SIZES_BCAST PERF_SIZES_HIER

parse() {   # KIND FILE...
    python3 - "$@" <<'EOF'
import os, re, sys

kind, files = sys.argv[1], sys.argv[2:]

def nbytes(w):
    m = re.fullmatch(r"(\d+)([KMG]?)", w)
    return int(m.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30}[m.group(2)]

def sizes(var):
    return [nbytes(w) for w in os.environ[var].split()]

def label(b):
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if b >= 1 << shift and b % (1 << shift) == 0:
            return f"{b >> shift} {unit}"
    return f"{b} B"

def median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2

def lat(v):   # the figures' precision of the document: three digits or so
    return f"{v:.2f}" if v < 10 else f"{v:.1f}" if v < 1000 else f"{v:.0f}"

def table(head, rows):
    print("| " + " | ".join(head) + " |")
    print("| ---: | " + " | ".join("---" for _ in head[1:]) + " |")
    for r in rows:
        print("| " + " | ".join(r) + " |")

def numbers(fields, n):
    try:
        return [float(f) for f in fields[:n]]
    except ValueError:
        return None

def np_tables():
    # compare.sh: "### <coll> np=<N> <configuration>", then fr_osu_<coll>
    # --vs-mpi output: size, ours (us), MPI's (us), speedup, busbw, ...
    data, confs, dtype, nps = {}, {}, {}, set()
    for f in files:
        coll = conf = None
        for line in open(f):
            m = re.match(r"### (\w+) np=(\d+) (.*?)\s*$", line)
            if m:
                coll, conf = m.group(1), m.group(3)
                nps.add(m.group(2))
                if conf.endswith(": FAILED"):
                    coll = conf = None
                else:
                    confs.setdefault(coll, [])
                    if conf not in confs[coll]:
                        confs[coll].append(conf)
                continue
            m = re.match(r"# Datatype: (\S+?)\.?$", line.strip())
            if m and coll:
                dtype[coll] = m.group(1)
            w = line.split()
            if coll is None or not w or line.startswith("#") or not w[0].isdigit():
                continue
            v = numbers(w[1:], 3)
            if v and len(w) >= 4:
                data.setdefault((coll, conf, int(w[0])), []).append(v)
    np_ = "/".join(sorted(nps))
    for coll, var in (("allreduce", "PERF_SIZES_ALLREDUCE"), ("bcast", "PERF_SIZES_BCAST")):
        if coll not in confs:
            continue
        rounds = max(len(v) for k, v in data.items() if k[0] == coll)
        print(f"{coll}, np={np_}, {dtype.get(coll, '?')}: latency in us, ours / MPI's (speedup); "
              f"medians of {rounds} round{'s' if rounds > 1 else ''}\n")
        rows = []
        for s in sizes(var):
            row = [label(s)]
            for c in confs[coll]:
                v = data.get((coll, c, s))
                row.append("" if not v else "%s / %s (%.2fx)" % (lat(median([x[0] for x in v])),
                           lat(median([x[1] for x in v])), median([x[2] for x in v])))
            rows.append(row)
        table(["size"] + ["vs " + c for c in confs[coll]], rows)
        least = min(((median([x[2] for x in v]), k[2], k[1]) for k, v in data.items() if k[0] == coll),
                    default=None)
        if least:
            print(f"\nSmallest median speedup at any size measured: {least[0]:.2f}x "
                  f"({label(least[1])}, vs {least[2]}).\n")

def hier_tables():
    # hier.sh: "# <coll>, 2 nodes x 2 ranks, ...", a header line "size ALGO... best",
    # rows of medians; then "# <coll>, Open MPI with every byte on TCP ...", rows "size us"
    cols, data, coll, tcp = {}, {}, None, False
    for f in files:
        for line in open(f):
            w = line.split()
            if line.startswith("#"):
                m = re.match(r"# (\w+),", line)
                coll, tcp = (m.group(1) if m else None), "every byte on TCP" in line
                continue
            if not w or coll is None:
                continue
            if w[0] == "size":
                cols[coll] = [("mpi (shm)" if a == "mpi" else a) for a in w[1:-1]]
                continue
            if not w[0].isdigit():
                continue
            s = int(w[0])
            if tcp:
                data.setdefault((coll, s), {})["mpi (tcp)"] = float(w[1])
            else:
                for a, v in zip(cols[coll], w[1:]):
                    data.setdefault((coll, s), {})[a] = float(v)
    for coll in ("allreduce", "bcast"):
        if coll not in cols:
            continue
        head = cols[coll] + ["mpi (tcp)"]
        print(f"{coll}, 2 nodes x 2 ranks faked, UCX on TCP: median latency in us\n")
        print("| bytes | " + " | ".join(head) + " |")
        print("| ---: | " + " | ".join("---:" for _ in head) + " |")
        for s in sizes("PERF_SIZES_HIER"):
            d = data.get((coll, s), {})
            print("| " + " | ".join([label(s)] + [("" if a not in d else
                  f"{d[a]:.1f}" if d[a] < 10 else f"{d[a]:.0f}") for a in head]) + " |")
        print()

def setup_table():
    # fr_comm_setup rows: np nodes measure... reps median_ms min_ms max_ms wrong
    order, vals = [], {}
    for f in files:
        for line in open(f):
            w = line.split()
            if line.startswith("#") or len(w) < 8 or not w[0].isdigit():
                continue
            key = (w[1], int(w[0]), " ".join(w[2:-5]))
            if key not in vals:
                order.append(key)
            vals.setdefault(key, []).append(float(w[-4]))
    runs = max((len(v) for v in vals.values()), default=0)
    print(f"Communicator set-up, the slowest rank's time in ms, median of the repetitions; "
          f"{runs} launch{'es' if runs > 1 else ''}, one figure each\n")
    print("| nodes | np | measure | ms |")
    print("| --- | --- | --- | --- |")
    for k in order:
        print(f"| {k[0]} | {k[1]} | {k[2]} | " +
              " / ".join(f"{v:.2f}" if v < 10 else f"{v:.1f}" if v < 100 else f"{v:.0f}" for v in vals[k]) + " |")

{"np": np_tables, "hier": hier_tables, "setup": setup_table}[kind]()
EOF
}

[ $# -ge 1 ] || usage
if [ "$1" = --parse ]; then
    [ $# -ge 3 ] || usage
    case $2 in np|hier|setup) ;; *) usage ;; esac
    parse "${@:2}"
    exit
fi
stamp=$(date -u +%Y%m%d-%H%M%S)
case $1 in
np)
    [ $# -ge 2 ] || usage; np=$2; rounds=${3:-3}; out=${4:-perf-np$np-$stamp}
    mkdir -p "$out"
    for k in $(seq 1 "$rounds"); do
        bash "$top/benchmarks/compare.sh" "$np" >"$out/round$k.txt" 2>&1
    done
    parse np "$out"/round*.txt
    ;;
hier)
    build=${2:-$top/build-openmpi}; out=${3:-perf-hier-$stamp}
    mkdir -p "$out"
    bash "$top/benchmarks/hier.sh" "$build" >"$out/hier.txt"
    parse hier "$out/hier.txt"
    ;;
setup)
    build=${2:-$top/build-openmpi}; reps=${3:-20}; launches=${4:-2}; out=${5:-perf-setup-$stamp}
    mkdir -p "$out"
    for k in $(seq 1 "$launches"); do
        bash "$top/benchmarks/setup.sh" "$build" "$reps" >"$out/setup$k.txt"
    done
    parse setup "$out"/setup*.txt
    ;;
*) usage ;;
esac
echo "(raw output in $out)"
