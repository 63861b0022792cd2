#!/bin/sh
# Launch wrapper for the node-split tests: gives each rank a FASTREDUCE_HOSTID
# of "node<rank % 2>", so the fake nodes interleave ranks (0,2,4 | 1,3,5).
r=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-${PMIX_RANK:-0}}}
FASTREDUCE_HOSTID="node$((r % 2))"
export FASTREDUCE_HOSTID
exec "$@"
