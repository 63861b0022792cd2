#!/usr/bin/env bash
# The autotuner's speed check: tune this machine at NP ranks within BUDGET
# seconds, then time the table's choice beside every algorithm forced, in
# one run with the columns' blocks in turn (fr_osu_allreduce --compare), at
# every power of two from 4 B to MAX, and summarise table/best.
# Usage: benchmarks/tunecheck.sh BUILD_DIR NP [BUDGET [MAX [OUTDIR]]]
#   e.g. benchmarks/tunecheck.sh build-openmpi 2 120
# Writes OUTDIR/np<NP>.tune, .csv, compare-allreduce.txt, compare-bcast.txt
# and the plots; prints the summary lines quoted in docs/performance.md.
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
"${launch[@]}" "$build/benchmarks/fastreduce-tune" --budget "$budget" --max "$max" -q -o "$t" | grep -v '^\[' | tail -n 5
export FASTREDUCE_TUNE_FILE=$t
# 31 blocks a size: with 11, the table's column and the very same configuration
# forced came out more than 5% apart at 1 or 2 of 25 sizes a run on the 2-core VM
# (bcast, the built-in table against shm); with 31, at none in two runs
[ "${launch[0]}" = mpirun ] && launch=(mpirun --oversubscribe --bind-to none -x FASTREDUCE_TUNE_FILE -n "$np")
"${launch[@]}" "$build/benchmarks/fr_osu_allreduce" -m 4:"$max" \
    --blocks 31 --compare table,shm,recursive_doubling,ring,rabenseifner,tree,mpi >"$out/compare-allreduce.txt"
"${launch[@]}" "$build/benchmarks/fr_osu_bcast" -m 4:"$max" \
    --blocks 31 --compare table,shm,binomial,pipeline,scatter_allgather,mpi >"$out/compare-bcast.txt"
for coll in allreduce bcast; do
    awk -v coll="$coll" -v np="$np" '
        /^# Size/ { for (i = 1; i <= NF; i++) if ($i == "table/best") col = i - 1; next }
        /^[0-9]/ { r = $col; n++; if (r <= 1.05) ok++; if (r > worst) { worst = r; at = $1 }; v[n] = r
                   lab = $(col + 1); for (i = col + 2; i <= NF; i++) lab = lab " " $i
                   if (r > 1.05 && lab == $(col - 1)) { same++; where = where " " $1 } }
        END {
            asort_n = n; for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
            med = n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
            printf "%s np=%d: table within 5%% of the best forced algorithm at %d of %d sizes; median table/best %.3f, worst %.3f at %d B\n", coll, np, ok, n, med, worst, at
            if (same) printf "%s np=%d: of the other %d, %d ran the best column'"'"'s own algorithm and parameters (the gap is the noise between two columns of one configuration) at%s B\n", coll, np, n - ok, same, where
        }' "$out/compare-$coll.txt"
done
"$top/benchmarks/fastreduce-plot" -o "$out/np$np" "${t%.tune}.csv" || true
