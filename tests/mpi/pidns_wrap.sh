#!/bin/bash
# Launch wrapper: runs the rank in a PID namespace of its own, as its pid 1
# with its own /proc (as ranks in containers that share IPC but not PIDs).
# Every rank is then pid 1, so /proc/<creator's pid>/fd/<n>, opened by
# another rank, names one of that rank's own descriptors. With FR_DECOY set,
# ranks other than the node's first have every descriptor from 3 to 511 not
# already open on that file, so such an open finds it rather than nothing.
# Needs root (unshare --pid --mount-proc).
if [ "${FR_PIDNS_IN:-}" != 1 ]; then
    FR_PIDNS_IN=1 exec unshare --pid --fork --mount-proc --kill-child "$0" "$@"
fi
lr=${OMPI_COMM_WORLD_LOCAL_RANK:-${MPI_LOCALRANKID:-0}}
if [ "$lr" != 0 ] && [ -n "${FR_DECOY:-}" ]; then
    for fd in $(seq 3 511); do
        [ -e "/proc/self/fd/$fd" ] || eval "exec $fd<>\"\$FR_DECOY\""
    done
fi
exec "$@"
