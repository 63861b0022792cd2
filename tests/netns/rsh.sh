#!/bin/sh
# plm_rsh_agent for tests/netns/run.sh: Open MPI calls it as `ssh` would be
# called, `rsh.sh HOST COMMAND...`. HOST is the name of a network namespace
# (fr-ns0, ...): the command runs inside it, in a UTS namespace of its own
# whose host name is HOST, so that Open MPI (MPI_Get_processor_name, its
# session directories, vader's segment names) and libfastreduce see one host
# per namespace. The words of COMMAND are joined and given to sh -c, as sshd
# would do.
if [ "$#" -lt 2 ]; then
    echo "rsh.sh: usage: rsh.sh NAMESPACE COMMAND..." >&2
    exit 255
fi
ns=$1
shift
case $ns in
    *[!A-Za-z0-9_.-]*) echo "rsh.sh: bad namespace name '$ns'" >&2; exit 255 ;;
esac
if [ ! -e "/run/netns/$ns" ]; then
    echo "rsh.sh: no network namespace '$ns' (ip netns list)" >&2
    exit 255
fi
# shellcheck disable=SC2016  # expanded by the inner sh
exec ip netns exec "$ns" unshare --uts sh -c 'hostname "$1" && shift && exec sh -c "$*"' rsh.sh "$ns" "$@"
