#!/usr/bin/env bash
# The main job: install what is missing, build, and benchmark fr_allreduce and
# fr_bcast on 2 local ranks over 4 B .. 64 MiB, beside MPI's own, showing the
# algorithm chosen for each size; then plots them into build-openmpi/plots/
# (PNG, gnuplot). NP and MAX may be set in the environment.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/deps.sh"
"$top/scripts/build.sh" openmpi
. "$top/scripts/env.sh"
np=${NP:-2}
max=${MAX:-67108864}
cd "$top/build-openmpi"
echo
mkdir -p plots
mpirun -np "$np" benchmarks/fr_osu_allreduce -m 4:"$max" -i 200 -x 20 --vs-mpi | tee plots/allreduce.txt
echo
mpirun -np "$np" benchmarks/fr_osu_bcast -m 4:"$max" -i 200 -x 20 --vs-mpi | tee plots/bcast.txt
echo
# Latency and busbw against size, ours and MPI's, the table's crossovers marked.
"$top/benchmarks/fastreduce-plot" -o "$PWD/plots/main" plots/allreduce.txt plots/bcast.txt
