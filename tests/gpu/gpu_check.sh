#!/bin/bash
# The GPU checks in one run (a few minutes on a machine with 1+ NVIDIA GPUs,
# CUDA and NCCL in /usr/local/cuda, Open MPI): build, the device-buffer
# tests, NCCL alone loading the tuner plugin, and fr_osu_allreduce -d cuda
# with the table's choice beside NCCL's own, NCCL's TUNING log beside ours.
# Usage: tests/gpu/gpu_check.sh [OUTDIR]   (default $OUT or gpu-check)
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-${OUT:-$top/gpu-check}}
mkdir -p "$out"
exec > >(tee "$out/gpu_check.log") 2>&1
cd "$top"
echo "=== $(date -u +%FT%TZ) $(hostname)"
nvidia-smi -L || { echo "gpu_check: no nvidia-smi: not a GPU machine"; exit 77; }
ngpu=$(nvidia-smi -L | grep -c '^GPU')
command -v mpicc >/dev/null || scripts/deps.sh || { echo "gpu_check: Open MPI is missing and cannot be installed"; exit 1; }
. scripts/env.sh
echo "=== build (Open MPI, CUDA and NCCL from /usr/local/cuda)"
scripts/build.sh openmpi || exit 1
grep -E '^#define FR_BUILT_(CUDA|NCCL) ' build-openmpi/config.h
B=$top/build-openmpi
echo "=== device-buffer tests and the plugin's unit tests"
make -C "$B/tests" check TESTS="unit/test_nccl_tuner gpu/run_gpu.sh" >"$out/check.out" 2>&1
grep -E '^(PASS|FAIL|SKIP|ERROR)' "$out/check.out"
cat "$B/tests/gpu/run_gpu.sh.log" 2>/dev/null | grep -E '^(PASS|FAIL|SKIP)|passed, '
cp -r "$B/tests/gpu-logs" "$out/" 2>/dev/null

echo "=== NCCL alone: NCCL_TUNER_PLUGIN=fastreduce in a program that only calls NCCL"
LD_LIBRARY_PATH=$B/lib/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} NCCL_TUNER_PLUGIN=fastreduce NCCL_DEBUG=INFO \
    NCCL_DEBUG_SUBSYS=INIT,TUNING FASTREDUCE_TUNE="allreduce cuda * * 0-64K nccl_tree; allreduce cuda * * 64K-inf nccl_ring proto=simple" \
    timeout 300 "$B/tests/gpu/nccl_plugin_load" >"$out/plugin_load.log" 2>&1
echo "exit $?"
grep -iE 'tuner|fastreduce' "$out/plugin_load.log" | head -30

echo "=== fr_osu_allreduce -d cuda on $ngpu rank(s): the table's choice, NCCL's own, ring and tree forced"
FASTREDUCE_DEBUG=INFO FASTREDUCE_DEBUG_SUBSYS=COLL,NCCL NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING \
    timeout 400 mpirun --bind-to none -x FASTREDUCE_DEBUG -x FASTREDUCE_DEBUG_SUBSYS -x NCCL_DEBUG -x NCCL_DEBUG_SUBSYS \
    -np "$ngpu" "$B/benchmarks/fr_osu_allreduce" -d cuda -m 4:256M --compare table,nccl,nccl_ring,nccl_tree \
    >"$out/osu_cuda.log" 2>&1
echo "exit $?"
grep -vE 'INFO|^\[' "$out/osu_cuda.log" | head -60
echo "--- ours (rank 0: the algorithm per call) beside NCCL's (its TUNING lines), first of each size"
grep -E ':0 fastreduce INFO #[0-9]+ allreduce' "$out/osu_cuda.log" | sed -E 's/.* allreduce ([0-9]+) bytes.* -> ([a-z_]+) .*/\1 \2/' |
    sort -n -u -k1,1 | head -40 >"$out/ours.txt"
grep -E 'AllReduce: [0-9]+ Bytes' "$out/osu_cuda.log" | sed -E 's/.*AllReduce: ([0-9]+) Bytes -> (.*)/\1 \2/' |
    sort -n -u -k1,1 | head -40 >"$out/nccl.txt"
join -a1 "$out/ours.txt" "$out/nccl.txt" | column -t
grep -E 'fastreduce tuner' "$out/osu_cuda.log" | sort | uniq -c | sort -rn | head -10
echo "=== gpu_check done: $out"
