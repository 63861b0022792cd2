#!/usr/bin/env bash
# Side-by-side runs of fr_osu_allreduce / fr_osu_bcast --vs-mpi against each
# MPI configuration of this machine: Open MPI default, Open MPI ob1+vader,
# Open MPI pml ucx, and MPICH. Each line of the output is one run's table.
# Usage: benchmarks/compare.sh [NP] [MAX]   (run from the source tree after scripts/build.sh for both MPIs)
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
np=${1:-2}; max=${2:-67108864}
. "$top/scripts/env.sh"
run() {  # label launcher... -- binary
    local label=$1; shift
    echo "### $label"
    "$@" -m 4:"$max" --vs-mpi -c 2>&1 || echo "### $label: FAILED"
}
for coll in allreduce bcast; do
    ob=$top/build-openmpi/benchmarks/fr_osu_$coll
    mb=$top/build-mpich/benchmarks/fr_osu_$coll
    run "$coll np=$np Open MPI default" mpirun -np "$np" "$ob"
    run "$coll np=$np Open MPI ob1+vader" mpirun -np "$np" --mca pml ob1 --mca btl self,vader "$ob"
    run "$coll np=$np Open MPI pml ucx" mpirun -np "$np" --mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any "$ob"
    # (an if, not `[ -x ] && run`: as the last command that would end the
    # script with status 1 without MPICH, which stops perf_tables.sh's set -e)
    if [ -x "$mb" ]; then
        run "$coll np=$np MPICH" mpiexec.mpich -bind-to core -n "$np" "$mb"
    else
        echo "# $coll np=$np MPICH: skipped, no $mb (scripts/build.sh mpich)"
    fi
done
