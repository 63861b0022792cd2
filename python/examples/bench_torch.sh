#!/usr/bin/env bash
# PyTorch data-parallel training (train_torch.py) in its three modes -
# fastreduce's DistributedOptimizer, DDP with fastreduce's allreduce hook,
# plain DDP over gloo - at each rank count, the same model, data and bucket
# size for all. The modes run in turn within each of R rounds, their order
# rotated from round to round, so that a slow spell of the machine falls on
# each in turn. Prints, per rank count and mode, the median over the rounds
# of each run's median step time and exposed communication (train_torch.py's
# docstring says how they are measured) and the speedup of the fastreduce
# modes over plain DDP (DDP's median step time / the mode's).
#
# Usage: python/examples/bench_torch.sh [BUILD_DIR] [-- train_torch.py options]
#   BUILD_DIR (build-openmpi): its lib/.libs/libfastreduce.so and pympi/ (mpi4py),
#   with build-pyenv/'s Python (scripts/test_python.sh makes both).
# Environment: R (rounds, 3), NPS (rank counts, "2 4"), MODES ("fastreduce
#   hook ddp"), MPIRUN (mpirun), and the model's options HIDDEN (1024), LAYERS
#   (4), BATCH (64), BUCKET_MB (25), EPOCHS (2), N_TRAIN (8192),
#   COMPRESSION (none). Ranks are not bound to cores and may outnumber them
#   (--oversubscribe --bind-to none); each rank gets the node's cores / its
#   ranks torch threads (train_torch.py's --threads 0).
# Each run's output is kept in $LOGDIR (a new temporary directory).
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
build=build-openmpi
if [ $# -gt 0 ] && [ "$1" != "--" ]; then build=$1; shift; fi
[ "${1:-}" = "--" ] && shift
build=$(cd "$top" && cd -- "$build" && pwd) || { echo "bench_torch: no build directory $build"; exit 1; }
[ -f "$build/lib/.libs/libfastreduce.so" ] || { echo "bench_torch: no $build/lib/.libs/libfastreduce.so"; exit 1; }
R=${R:-3}; NPS=${NPS:-"2 4"}; MODES=${MODES:-"fastreduce hook ddp"}; MPIRUN=${MPIRUN:-mpirun}
HIDDEN=${HIDDEN:-1024}; LAYERS=${LAYERS:-4}; BATCH=${BATCH:-64}; BUCKET_MB=${BUCKET_MB:-25}
EPOCHS=${EPOCHS:-2}; N_TRAIN=${N_TRAIN:-8192}; COMPRESSION=${COMPRESSION:-none}
[ -f "$top/scripts/env.sh" ] && . "$top/scripts/env.sh"
export FASTREDUCE_LIB=$build/lib/.libs/libfastreduce.so PYTHONPATH=$top/python:$build/pympi PYTHONDONTWRITEBYTECODE=1
py=${FR_PYENV:-$top/build-pyenv}/bin/python
[ -x "$py" ] || { echo "bench_torch: no $py (scripts/test_python.sh makes it)"; exit 1; }
LOGDIR=${LOGDIR:-$(mktemp -d /tmp/bench_torch.XXXXXX)}
mkdir -p "$LOGDIR"
opts=(--hidden "$HIDDEN" --layers "$LAYERS" --batch "$BATCH" --bucket-mb "$BUCKET_MB" --epochs "$EPOCHS"
      --n-train "$N_TRAIN" --compression "$COMPRESSION" "$@")
flags=(); [[ $MPIRUN == mpirun* ]] && flags=(--oversubscribe --bind-to none -x FASTREDUCE_LIB -x PYTHONPATH
                                              -x PYTHONDONTWRITEBYTECODE)
read -ra modes <<<"$MODES"
echo "train_torch.py ${opts[*]}; $R rounds; $(nproc) cores; logs in $LOGDIR"
results=$LOGDIR/results
: >"$results"
for np in $NPS; do
    for ((r = 0; r < R; r++)); do
        n=${#modes[@]}
        for ((k = 0; k < n; k++)); do
            mode=${modes[$(((k + r) % n))]}
            log=$LOGDIR/np$np-$mode-$r.log
            timeout 900 "$MPIRUN" "${flags[@]}" -n "$np" "$py" "$top/python/examples/train_torch.py" --mode "$mode" \
                "${opts[@]}" >"$log" 2>&1
            rc=$?
            line=$(grep '^summary:' "$log")
            same=$(grep -c 'bit-identical on all .* ranks: yes' "$log")
            if [ $rc -ne 0 ] || [ -z "$line" ]; then
                echo "FAIL: np=$np $mode round $r (exit $rc), see $log"; tail -5 "$log"; continue
            fi
            [ "$same" = 1 ] || echo "WARNING: np=$np $mode round $r: parameters differ between ranks"
            echo "$line" >>"$results"
            echo "  np=$np round $((r + 1)) ${line#summary: }"
        done
    done
done
"$py" - "$results" "$NPS" "$MODES" <<'EOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    f = line.split()[1:]
    d = dict(zip(f[0::2], f[1::2]))
    rows.setdefault((int(d["np"]), d["mode"]), []).append(d)
med = lambda k, rs: statistics.median(float(r[k]) for r in rs)
print("\n| mode | np | runs | step (ms) | compute (ms) | exposed comm (ms) | exposed (% of step) "
      "| speedup over DDP gloo |")
print("|---|---|---|---|---|---|---|---|")
for np_ in map(int, sys.argv[2].split()):
    base = rows.get((np_, "ddp"))
    for mode in sys.argv[3].split():
        rs = rows.get((np_, mode))
        if not rs:
            print("| %s | %d | 0 | - | - | - | - | - |" % (mode, np_))
            continue
        step = med("step_ms", rs)
        speed = "%.2fx" % (med("step_ms", base) / step) if base and mode != "ddp" else "-"
        print("| %s | %d | %d | %.2f | %.2f | %.2f | %.1f | %s |" % (
            mode, np_, len(rs), step, med("compute_ms", rs), med("exposed_ms", rs), med("exposed_pct", rs), speed))
EOF
