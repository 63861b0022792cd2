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
# NCCL's tuner plugin is installed beside the library, exporting its three entry points and nothing else
plugin="$prefix/lib/libnccl-tuner-fastreduce.so"
syms=$(nm -D --defined-only "$plugin" 2>/dev/null | awk '$2 ~ /^[A-Za-z]$/ {print $3}' | sort | tr '\n' ' ')
if [ "$syms" = "ncclTunerPlugin_v3 ncclTunerPlugin_v4 ncclTunerPlugin_v5 " ]; then
    passed=$((passed + 1))
else
    failed=$((failed + 1)); echo "FAIL: $plugin exports '${syms:-nothing (missing?)}'"
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
echo "install_check: $passed passed, $failed failed"
[ $failed -eq 0 ]
