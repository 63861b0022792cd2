#!/usr/bin/env bash
# Build libfastreduce against one MPI in build-<mpi>/ (openmpi by default, or mpich).
# Usage: scripts/build.sh [openmpi|mpich] [extra configure arguments]
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
mpi=${1:-openmpi}; shift || true
case $mpi in
    openmpi) mpicc=mpicc ;;
    mpich) mpicc=mpicc.mpich ;;
    *) echo "build.sh: unknown MPI '$mpi' (openmpi or mpich)" >&2; exit 2 ;;
esac
cd "$top"
if [ ! -x configure ] || [ configure.ac -nt configure ] || [ -n "$(find . -name Makefile.am -newer configure -print -quit)" ]; then
    mkdir -p m4
    autoreconf -fi >/dev/null
fi
mkdir -p "build-$mpi"
cd "build-$mpi"
# configure again when configure changed or the arguments differ from last time
args="MPICC=$mpicc --prefix=$top/build-$mpi/install $*"
if [ ! -f config.status ] || [ ../configure -nt config.status ] || [ "$(cat .configure-args 2>/dev/null)" != "$args" ]; then
    ../configure MPICC="$mpicc" --prefix="$top/build-$mpi/install" "$@"
    echo "$args" >.configure-args
fi
make -j"$(nproc)" >/dev/null
echo "build.sh: built build-$mpi"
