#!/bin/sh
# Launch wrapper for the node-split tests: gives each rank a FASTREDUCE_HOSTID
# of "node<rank % 2>", so the fake nodes interleave ranks (0,2,4 | 1,3,5);
# FR_HOSTID_PREFIX, when set, is put before it (ids of any length).
r=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-${PMIX_RANK:-0}}}
FASTREDUCE_HOSTID="${FR_HOSTID_PREFIX:-}node$((r % 2))"
export FASTREDUCE_HOSTID
exec "$@"
