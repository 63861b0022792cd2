#!/usr/bin/env bash
# What a communicator costs (fr_comm_setup) at 1, 2 and 4 ranks, on one
# node and with every rank its own faked node (FASTREDUCE_NODE_SIZE=1), in
# one table of medians over REPS repetitions.
# Usage: benchmarks/setup.sh BUILD_DIR [REPS] [MPIEXEC]
set -euo pipefail
build=$1; reps=${2:-20}; mpiexec=${3:-mpirun}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
header=
for nodes in one faked; do
    for np in 1 2 4; do
        size=0; [ "$nodes" = faked ] && size=1
        FASTREDUCE_NODE_SIZE=$size "$mpiexec" -np "$np" "$build/benchmarks/fr_comm_setup" -r "$reps" \
            --node-size "$size" $header
        header=--no-header
    done
done
