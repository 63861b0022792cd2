#!/usr/bin/env bash
# The autotuner's speed check: tune this machine at NP ranks within BUDGET
# seconds, then time the table's choice beside every algorithm forced
# (fr_osu_allreduce --compare, the columns' blocks in turn), at every power of
# two from 4 B to MAX, and summarise table/best.
# Usage: benchmarks/tunecheck.sh BUILD_DIR NP [BUDGET [MAX [OUTDIR]]]
#   e.g. benchmarks/tunecheck.sh build-openmpi 2 120
# TUNECHECK_TABLE=FILE checks that table instead of tuning one.
# Writes OUTDIR/np<NP>.tune, .csv, pair-COLL-ALGO.txt (the table beside each
# algorithm alone), compare-COLL.txt (beside all of them in turn) and the
# plots; prints the summary lines quoted in docs/performance.md.
set -euo pipefail
build=${1:?usage: tunecheck.sh BUILD_DIR NP [BUDGET [MAX [OUTDIR]]]}
np=${2:?usage: tunecheck.sh BUILD_DIR NP [BUDGET [MAX [OUTDIR]]]}
budget=${3:-120}
max=${4:-67108864}
build=$(cd "$build" && pwd)
out=${5:-$build/tunecheck-np$np}
mkdir -p "$out"
top=$(cd "$(dirname "$0")/.." && pwd)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
t=$out/np$np.tune
launch=(mpirun --oversubscribe --bind-to none -n "$np")
mpirun --version 2>/dev/null | grep -q "Open MPI" || launch=(mpiexec -n "$np")
if [ -n "${TUNECHECK_TABLE:-}" ]; then   # check that table rather than tune
    t=$TUNECHECK_TABLE
else
    "${launch[@]}" "$build/tools/fastreduce-tune" --budget "$budget" --max "$max" -q -o "$t" | grep -v '^\[' | tail -n 5
fi
export FASTREDUCE_TUNE_FILE=$t
# 31 blocks a size: with fewer, the table's column and the very same configuration
# forced can come out more than 5% apart (docs/performance.md, "Design decisions")
[ "${launch[0]}" = mpirun ] && launch=(mpirun --oversubscribe --bind-to none -x FASTREDUCE_TUNE_FILE -n "$np")
algos_allreduce="shm recursive_doubling ring rabenseifner tree mpi"
algos_bcast="shm binomial pipeline scatter_allgather mpi"
# Two checks. In pairs: the table beside one forced algorithm at a time, as
# separate runs of each with --algo would measure it (the speed goal's method),
# with the two in turn so that the machine's changes of speed fall on both.
# All together: every column in turn, four calls a block above 64 KiB, so each
# block starts after the other algorithms have pushed its data out of the
# caches, as other work between a program's calls would.
for coll in allreduce bcast; do
    algos=algos_$coll
    for a in ${!algos}; do
        "${launch[@]}" "$build/benchmarks/fr_osu_$coll" -m 4:"$max" --blocks 31 --compare "table,$a" \
            >"$out/pair-$coll-$a.txt"
    done
    "${launch[@]}" "$build/benchmarks/fr_osu_$coll" -m 4:"$max" --blocks 31 \
        --compare "table,$(echo ${!algos} | tr ' ' ,)" >"$out/compare-$coll.txt"
done
# the table/best column of FILEs (with a table/best column) at each size: the
# largest over the files, the best-forced column it came from, the table's label
worst_of() {
    awk '/^# Size/ { for (i = 1; i <= NF; i++) if ($i == "table/best") col = i - 1; next }
         /^[0-9]/ { if ($col + 0 <= 0) next
                    lab = $(col + 1); for (i = col + 2; i <= NF; i++) lab = lab " " $i
                    if (!($1 in r) || $col > r[$1]) { r[$1] = $col; b[$1] = $(col - 1); l[$1] = lab } }
         END { for (s in r) print s, r[s], b[s], l[s] }' "$@" | sort -n
}
summary() {   # COLL NP WHAT FILE...
    local coll=$1 np=$2 what=$3
    shift 3
    worst_of "$@" | awk -v coll="$coll" -v np="$np" -v what="$what" '
        { r = $2; n++; if (r <= 1.05) ok++; if (r > worst) { worst = r; at = $1 }; v[n] = r
          lab = $4; for (i = 5; i <= NF; i++) lab = lab " " $i
          if (r > 1.05) { miss = miss sprintf(" %s (%s, %.3f)", $1, $3, r); if (lab == $3) same++ } }
        END {
            for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
            med = n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
            printf "%s np=%d, %s: table within 5%% of the best forced algorithm at %d of %d sizes; median table/best %.3f, worst %.3f at %d B\n", coll, np, what, ok, n, med, worst, at
            if (n > ok) printf "%s np=%d, %s: outside 5%% (size, faster forced column, table/it):%s; %d of them the table ran that column'"'"'s own algorithm and parameters (the gap is the noise between two columns of one configuration)\n", coll, np, what, miss, same + 0
        }'
}
for coll in allreduce bcast; do
    summary "$coll" "$np" "in pairs" "$out"/pair-"$coll"-*.txt
    summary "$coll" "$np" "all together" "$out/compare-$coll.txt"
done
"$top/benchmarks/fastreduce-plot" -o "$out/np$np" "${t%.tune}.csv" || true
