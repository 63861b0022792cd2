#!/bin/sh
# Launch wrapper: every rank its own node, for NCCL and for fastreduce, so
# that NCCL forms a communicator of several ranks on one GPU (it refuses two
# ranks of one node on one GPU). NCCL_HOSTID and FASTREDUCE_HOSTID name the
# node after the rank; NCCL's traffic then goes over its socket transport on
# the loopback interface, and NCCL's ring and tree both exist (two or more
# nodes), so the tuner plugin is asked for each call.
r=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-${PMIX_RANK:-0}}}
NCCL_HOSTID="fake-node-$r" FASTREDUCE_HOSTID="fake-node-$r"
NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-lo} NCCL_IB_DISABLE=${NCCL_IB_DISABLE:-1}
export NCCL_HOSTID FASTREDUCE_HOSTID NCCL_SOCKET_IFNAME NCCL_IB_DISABLE
exec "$@"
