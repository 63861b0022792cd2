#!/bin/bash
# The device-buffer tests: test_device under $MPIEXEC with each algorithm
# forced, at one rank and at two and three (where fewer GPUs than ranks
# send every call down the staged path). Exit 77 with a message when the
# build has no CUDA or no GPU is visible; else ends with "N passed, M failed".
# Environment as tests/mpi/run_mpi.sh (MPIEXEC, FR_MPI_FLAVOR, top_builddir);
# FR_GPU_FAKE_NODES=1 runs 2 ranks, each its own node (tests/gpu/fake_nodes.sh),
# so that one GPU holds an NCCL communicator of two ranks: NCCL, its ring and
# its tree then serve the calls, over sockets, instead of the staged path.
set -u
MPIEXEC=${MPIEXEC:-mpirun}
FLAVOR=${FR_MPI_FLAVOR:-openmpi}
top_builddir=${top_builddir:-..}
BIN=$top_builddir/tests/gpu/test_device
LOGDIR=${FR_TEST_LOGDIR:-gpu-logs}
QUICK=${FASTREDUCE_TEST_QUICK:-0}
FAKE=${FR_GPU_FAKE_NODES:-0}
here=$(cd "$(dirname "$0")" && pwd)
wrap=(); nps="1 2 3"
[ "$FAKE" = 1 ] && wrap=("$here/fake_nodes.sh") nps=2
if [ ! -x "$BIN" ]; then
    echo "SKIP: tests/gpu: this build has no CUDA (configure found none, or --without-cuda)"
    exit 77
fi
mkdir -p "$LOGDIR"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
unset FASTREDUCE_ALGO FASTREDUCE_TUNE FASTREDUCE_TUNE_FILE FASTREDUCE_NODE_SIZE
export FASTREDUCE_TUNE_PATH= FASTREDUCE_DEBUG=INFO FASTREDUCE_DEBUG_SUBSYS=COLL,NCCL
pass=0; fail=0
launch() {  # launch NP LOG ARGS...
    local np=$1 log=$2; shift 2
    local l=("$MPIEXEC")
    [ "$FLAVOR" = openmpi ] && l+=(--oversubscribe --bind-to none -x FASTREDUCE_DEBUG -x FASTREDUCE_DEBUG_SUBSYS \
                                   -x FASTREDUCE_TUNE_PATH)
    local q=(); [ "$QUICK" = 1 ] && q=(--quick)
    timeout -k 15 "${FR_TEST_TIMEOUT:-600}" "${l[@]}" -n "$np" "${wrap[@]}" "$BIN" "${q[@]}" "$@" </dev/null >"$log" 2>&1
}
launch 1 "$LOGDIR/probe.log" --probe
rc=$?
if [ $rc = 77 ]; then
    grep -m1 '^SKIP' "$LOGDIR/probe.log" || echo "SKIP: tests/gpu: no GPU"
    exit 77
fi
for np in $nps; do
    for algo in default nccl nccl_ring nccl_tree staged; do
        log="$LOGDIR/np$np-$algo${wrap:+-fake}.log"
        # (at 2 ranks the default also has a rank skip a call under FASTREDUCE_TIMEOUT)
        extra=(); [ "$np" = 2 ] && [ "$algo" = default ] && extra=(--skip)
        launch "$np" "$log" --algo "$algo" "${extra[@]}"
        rc=$?
        line=$(grep -E '^test_device np=[0-9]+: [0-9]+ passed, [0-9]+ failed$' "$log" | tail -n 1)
        p=$(echo "$line" | sed -nE 's/.*: ([0-9]+) passed.*/\1/p'); f=$(echo "$line" | sed -nE 's/.* ([0-9]+) failed$/\1/p')
        pass=$((pass + ${p:-0})); fail=$((fail + ${f:-1}))
        # which algorithm rank 0 says served the device calls
        want=$algo
        [ "$algo" = default ] && want=nccl
        # fewer GPUs than ranks on the node: two ranks share one, NCCL is not set up
        read -r ngpu nlocal < <(sed -nE 's/^test_device: ([0-9]+) GPU\(s\) visible, ([0-9]+) rank\(s\) on the node$/\1 \2/p' "$log")
        [ "${nlocal:-1}" -gt "${ngpu:-0}" ] && [ "$FAKE" != 1 ] && want=staged
        served=$(grep -cE ":0 fastreduce INFO #[0-9]+ (allreduce|bcast) [0-9]+ bytes .* -> $want \(" "$log")
        if [ "$rc" = 0 ] && [ -n "$line" ] && [ "${f:-1}" = 0 ] && [ "$served" -gt 0 ]; then
            echo "PASS: np=$np${wrap:+ (nodes faked)} --algo $algo: $line; $served calls served by $want"
        else
            echo "FAIL: np=$np${wrap:+ (nodes faked)} --algo $algo: exit $rc, ${line:-no summary}, $served calls served by $want  log: $log"
            grep -E '^FAIL' "$log" | head -20 | sed 's/^/    /'
            fail=$((fail + 1))
        fi
    done
done
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
