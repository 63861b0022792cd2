#!/usr/bin/env bash
# The hierarchical algorithms against the flat ones and MPI, with 4 ranks
# faked as 2 nodes x 2 (FASTREDUCE_NODE_SIZE=2) and UCX's traffic on TCP:
# one table per collective (median us per size, benchmarks/sweep.sh), then
# Open MPI's own collectives with every byte on TCP (--mca btl self,tcp), the
# fair reference, since MPI cannot see the faked node boundary.
# Usage: benchmarks/hier.sh BUILD_DIR [MAX_BYTES]
set -euo pipefail
build=$1; max=${2:-16777216}
here=$(cd "$(dirname "$0")" && pwd)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
echo "# allreduce, 2 nodes x 2 ranks, FASTREDUCE_UCX_TLS=tcp,self (mpi column: Open MPI on shared memory)"
bash "$here/sweep.sh" "$build" allreduce 4 "hier ring rabenseifner mpi" "$max" FASTREDUCE_NODE_SIZE=2 FASTREDUCE_UCX_TLS=tcp,self
echo "# bcast, 2 nodes x 2 ranks, FASTREDUCE_UCX_TLS=tcp,self"
bash "$here/sweep.sh" "$build" bcast 4 "hier binomial pipeline mpi" "$max" FASTREDUCE_NODE_SIZE=2 FASTREDUCE_UCX_TLS=tcp,self
for c in allreduce bcast; do
    echo "# $c, Open MPI with every byte on TCP (--mca btl self,tcp)"
    OMPI_MCA_btl=self,tcp mpirun -np 4 "$build/benchmarks/fr_osu_$c" -m 4:"$max" -i 20 -x 3 --algo mpi |
        awk '!/^#/ {print $1, $2}'
done
