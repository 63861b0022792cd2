#!/bin/sh
# Launch wrapper for the binding tests: local rank l starts bound to CPU
# l mod (the CPUs online), as a launcher binding one rank a core would.
l=${OMPI_COMM_WORLD_LOCAL_RANK:-${MPI_LOCALRANKID:-0}}
exec taskset -c $((l % $(nproc --all))) "$@"
