#!/usr/bin/env bash
# Install a build into a fresh prefix, build examples/allreduce_check.c with
# `pkg-config fastreduce` alone, and run it with every algorithm forced.
# Usage: scripts/install_check.sh BUILD_DIR MPICC MPIEXEC
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=$1; mpicc=$2; mpiexec=$3
. "$top/scripts/env.sh"
# The prefix the build was configured with (scripts/build.sh: BUILD_DIR/install).
prefix=$(sed -n 's/^prefix = //p' "$build/Makefile")
case $prefix in "$build"/*|*/build-*/install) rm -rf "$prefix" ;; esac
make -C "$build" install >/dev/null || { echo "install failed"; echo "install_check: 0 passed, 1 failed"; exit 1; }
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
$mpicc -o "$prefix/allreduce_check" "$top/examples/allreduce_check.c" $(pkg-config --cflags --libs fastreduce) ||
    { echo "building against the installed prefix failed"; echo "install_check: 0 passed, 1 failed"; exit 1; }
export LD_LIBRARY_PATH="$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
algos=$("$prefix/bin/fastreduce-info" --no-table | awk '/^algorithms:/{on=1; next} on && NF>=2 {print $1 "=" $2} /^$/{if(on) exit}')
passed=0; failed=0
for a in $algos; do
    for np in 1 3 4; do
        flags=(); [[ $mpiexec == mpirun* ]] && flags=(--oversubscribe --bind-to none)
        if out=$(FASTREDUCE_ALGO=$a timeout 120 $mpiexec "${flags[@]}" -n $np "$prefix/allreduce_check" 2>&1) &&
           grep -q ": [0-9]* passed, 0 failed" <<<"$out"; then
            passed=$((passed + 1))
        else
            failed=$((failed + 1)); echo "FAIL: FASTREDUCE_ALGO=$a np=$np"; echo "$out" | tail -5
        fi
    done
done
# Each installed library exports its public interface and nothing else
# (the NCCL tuner module, the interposer and libfastreduce itself)
if out=$(srcdir="$top/tests" "$top/tests/exports.sh" "$prefix/lib" 2>&1); then
    passed=$((passed + 1))
else
    failed=$((failed + 1)); echo "$out" | grep -v ' exported symbols$'
fi
# The interposer from the prefix, LD_PRELOADed under a program built with the MPI compiler alone
if $mpicc -o "$prefix/mpi_program" "$top/tests/mpi/mpi_program.c"; then
    flags=(); [[ $mpiexec == mpirun* ]] && flags=(--oversubscribe --bind-to none)
    plain=$(timeout 300 $mpiexec "${flags[@]}" -n 2 "$prefix/mpi_program" 2>/dev/null | sort | md5sum)
    pre=$(timeout 300 $mpiexec "${flags[@]}" -n 2 env LD_PRELOAD="$prefix/lib/libfastreduce-mpi.so" FASTREDUCE_STATS=1 \
          "$prefix/mpi_program" 2>"$prefix/preload.err" | sort | md5sum)
    if [ "$plain" = "$pre" ] && grep -qE 'fastreduce STATS allreduce +fr ' "$prefix/preload.err"; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1)); echo "FAIL: LD_PRELOAD=$prefix/lib/libfastreduce-mpi.so: results differ or nothing served"
        tail -5 "$prefix/preload.err"
    fi
else
    failed=$((failed + 1)); echo "FAIL: building tests/mpi/mpi_program.c with $mpicc"
fi
# ... and under one of non-blocking collectives, which checks its own results
if $mpicc -pthread -o "$prefix/mpi_nb_program" "$top/tests/mpi/mpi_nb_program.c"; then
    flags=(); [[ $mpiexec == mpirun* ]] && flags=(--oversubscribe --bind-to none)
    out=$(timeout 300 $mpiexec "${flags[@]}" -n 2 env LD_PRELOAD="$prefix/lib/libfastreduce-mpi.so" \
          "$prefix/mpi_nb_program" multiple 2>&1)
    if grep -qE '^mpi_nb_program multiple np=2: [0-9]+ passed, 0 failed$' <<<"$out"; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1)); echo "FAIL: mpi_nb_program under LD_PRELOAD=$prefix/lib/libfastreduce-mpi.so"
        echo "$out" | tail -5
    fi
else
    failed=$((failed + 1)); echo "FAIL: building tests/mpi/mpi_nb_program.c with $mpicc"
fi
echo "install_check: $passed passed, $failed failed"
[ $failed -eq 0 ]
