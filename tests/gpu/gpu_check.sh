#!/bin/bash
# The GPU checks in one run, a few minutes on a node with 1+ NVIDIA GPUs and
# the project's build tools (Open MPI, UCX, hwloc, CUDA and NCCL): build,
# the device-buffer tests, NCCL alone loading the tuner plugin, and
# fr_osu_allreduce -d cuda with the table's choice beside NCCL's own and
# NCCL's TUNING log beside ours. Everything lands in OUTDIR, packed in
# gpu_check.tgz beside gpu_check.log.
# Usage: tests/gpu/gpu_check.sh [OUTDIR]   (default $OUT, else ./gpu-check)
# Environment: GPU_CHECK_MAX (largest osu size, default 64M),
#              FASTREDUCE_TEST_QUICK (default 1: run_gpu.sh's quick counts).
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-${OUT:-$top/gpu-check}}
mkdir -p "$out/logs"
exec > >(tee "$out/gpu_check.log") 2>&1
cd "$top"
export FASTREDUCE_TEST_QUICK=${FASTREDUCE_TEST_QUICK:-1} FR_TEST_TIMEOUT=${FR_TEST_TIMEOUT:-120}
finish() { tar czf "$out/gpu_check.tgz" -C "$out" logs 2>/dev/null; echo "=== gpu_check: $1 ($out)"; exit "${2:-0}"; }

echo "=== $(date -u +%FT%TZ) $(hostname): preflight"
missing=""
for t in nvidia-smi mpicc mpirun autoreconf make pkg-config; do command -v $t >/dev/null || missing="$missing $t"; done
for m in ucx hwloc; do pkg-config --exists $m 2>/dev/null || missing="$missing $m(pkg-config)"; done
ls /usr/local/cuda/include/nccl.h >/dev/null 2>&1 || missing="$missing nccl.h(/usr/local/cuda)"
nvidia-smi -L 2>&1 | head -8
[ -n "$missing" ] && finish "missing:$missing; nothing was built" 3
. scripts/env.sh

echo "=== build (Open MPI, CUDA and NCCL from /usr/local/cuda)"
timeout 400 scripts/build.sh openmpi >"$out/logs/build.log" 2>&1 || { tail -20 "$out/logs/build.log"; finish "build failed" 1; }
B=$top/build-openmpi
grep -E '^#define FR_BUILT_(CUDA|NCCL) ' "$B/config.h"
timeout 200 make -C "$B/tests" gpu/test_device gpu/nccl_plugin_load >"$out/logs/build_tests.log" 2>&1 ||
    { tail -20 "$out/logs/build_tests.log"; finish "the GPU test programs did not build" 1; }

echo "=== the plugin's unit tests (no GPU needed; only where Criterion is installed)"
if pkg-config --exists criterion; then
    timeout 120 make -C "$B/tests" unit/test_nccl_tuner >/dev/null 2>&1 &&
        (cd "$B/tests" && timeout 60 ./unit/test_nccl_tuner 2>&1 | tail -1)
else
    echo "(Criterion absent: skipped)"
fi

echo "=== device-buffer tests (tests/gpu/run_gpu.sh)"
(cd "$B/tests" && top_builddir=.. MPIEXEC=mpirun FR_MPI_FLAVOR=openmpi FR_TEST_LOGDIR="$out/logs/gpu" \
    timeout 420 bash "$top/tests/gpu/run_gpu.sh") 2>&1 | grep -E '^(PASS|FAIL|SKIP)|passed, |^    '
echo "exit ${PIPESTATUS[0]}"

echo "=== NCCL alone: NCCL_TUNER_PLUGIN=fastreduce in a program that only calls NCCL"
# (with one GPU NCCL's single-rank path never asks a tuner: this shows the
#  plugin loaded; its forcing is what unit/test_nccl_tuner shows)
LD_LIBRARY_PATH=$B/lib/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} NCCL_TUNER_PLUGIN=fastreduce NCCL_DEBUG=INFO \
    NCCL_DEBUG_SUBSYS=INIT,TUNING FASTREDUCE_TUNE="allreduce cuda * * 0-64K nccl_tree; allreduce cuda * * 64K-inf nccl_ring proto=simple" \
    timeout 120 "$B/tests/gpu/nccl_plugin_load" >"$out/logs/plugin_load.log" 2>&1
echo "exit $?"
grep -iE 'tuner|fastreduce|nccl_plugin_load' "$out/logs/plugin_load.log" | head -20

ngpu=$(nvidia-smi -L | grep -c '^GPU')
max=${GPU_CHECK_MAX:-64M}
echo "=== fr_osu_allreduce -d cuda on $ngpu rank(s), 4 B to $max: the table's choice, NCCL's own, ring and tree forced"
FASTREDUCE_DEBUG=INFO FASTREDUCE_DEBUG_SUBSYS=COLL,NCCL NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING \
    timeout 240 mpirun --bind-to none -x FASTREDUCE_DEBUG -x FASTREDUCE_DEBUG_SUBSYS -x NCCL_DEBUG -x NCCL_DEBUG_SUBSYS \
    -np "$ngpu" "$B/benchmarks/fr_osu_allreduce" -d cuda -m "4:$max" --compare table,nccl,nccl_ring,nccl_tree \
    >"$out/logs/osu_cuda.log" 2>&1
echo "exit $?"
grep -vE 'INFO|^\[|^ *$' "$out/logs/osu_cuda.log" | head -50
echo "--- per size: ours (rank 0's choice for the table column) beside NCCL's TUNING line (none with 1 GPU)"
grep -E ':0 fastreduce INFO #[0-9]+ allreduce' "$out/logs/osu_cuda.log" |
    sed -nE 's/.* allreduce ([0-9]+) bytes .* -> ([a-z_]+) .*/\1 \2/p' | sort -n -u -k1,1 >"$out/logs/ours.txt"
grep -E 'AllReduce: [0-9]+ Bytes' "$out/logs/osu_cuda.log" |
    sed -nE 's/.*AllReduce: ([0-9]+) Bytes -> (.*)/\1 \2/p' | sort -n -u -k1,1 >"$out/logs/nccl.txt"
join -a1 "$out/logs/ours.txt" "$out/logs/nccl.txt" | head -30
grep -hE 'fastreduce tuner' "$out/logs/osu_cuda.log" | sed -E 's/^.*fastreduce tuner: //' | sort | uniq -c | sort -rn | head -8
finish done 0
