#!/bin/bash
# The GPU checks in one run, a few minutes on a node with 1+ NVIDIA GPUs:
# the device-buffer tests, NCCL alone loading the tuner plugin, fastreduce-tune
# writing and checking cuda rows, fr_osu_bcast -d cuda, and
# fr_osu_allreduce -d cuda with the table's choice beside NCCL's own and
# NCCL's TUNING log beside ours, then host buffers at 2 and 8 ranks beside
# the node's MPI. Everything lands in OUTDIR, packed in
# gpu_check.tgz beside gpu_check.log.
# Usage: tests/gpu/gpu_check.sh [OUTDIR]
#          builds first: needs Open MPI, UCX, hwloc, CUDA and NCCL on the node
#        gpu_check.sh --bundle DIR [OUTDIR]
#          runs what tests/gpu/pack.sh packed in DIR (MPICH, UCX and hwloc
#          travel with it): for a node with the driver, CUDA and NCCL only
# OUTDIR defaults to $OUT, else ./gpu-check.
# Environment: GPU_CHECK_MAX (largest osu size, default 64M), GPU_CHECK_TESTS_S
#              (bound on the device-buffer tests, default 300 s), GPU_CHECK_TUNE_S
#              (fastreduce-tune's budget, default 60 s),
#              FASTREDUCE_TEST_QUICK (default 1: run_gpu.sh's quick counts),
#              GPU_CHECK_FAKE_MAX (largest size with ranks faked as nodes, 64K),
#              GPU_CHECK_PYTHON (a python with torch for CUDA and mpi4py, for the
#              torch part; default python3),
#              GPU_CHECK_PARTS (default plugin,tests,osu,tune,host,zcopy,cma,observe,torch,one,fake: which
#              parts run; one and fake choose the shapes of tests, osu and tune:
#              a rank per GPU, and 2 ranks faked as 2 nodes on a single GPU),
#              FR_NCCL_LIBDIR (where libnccl.so.2 is, for a bundle; else searched).
set -u
bundle=""
if [ "${1:-}" = --bundle ]; then bundle=$(cd "${2:?--bundle DIR}" && pwd); shift 2; fi
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
out=${1:-${OUT:-$PWD/gpu-check}}
mkdir -p "$out/logs"
out=$(cd "$out" && pwd)
exec > >(tee "$out/gpu_check.log") 2>&1
export FASTREDUCE_TEST_QUICK=${FASTREDUCE_TEST_QUICK:-1} FR_TEST_TIMEOUT=${FR_TEST_TIMEOUT:-60}
export FASTREDUCE_LIB=${FASTREDUCE_LIB:-} PYTHONPATH=${PYTHONPATH:-}   # (launch passes them on)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
finish() { tar czf "$out/gpu_check.tgz" -C "$out" logs 2>/dev/null; echo "=== gpu_check: $1 ($out)"; exit "${2:-0}"; }

echo "=== $(date -u +%FT%TZ) $(hostname): preflight${bundle:+ (bundle $bundle)}"
nvidia-smi -L 2>&1 | head -8
missing=""
if [ -n "$bundle" ]; then
    # the bundle's programs and libraries; NCCL is the node's own
    B=$bundle MPIRUN=$bundle/bin/mpiexec.hydra FLAVOR=mpich
    nccl=${FR_NCCL_LIBDIR:-}
    if [ -z "$nccl" ]; then
        f=$(ldconfig -p | sed -nE 's/.*libnccl\.so\.2 .*=> (.*)/\1/p' | head -n 1)
        for g in /usr/local/cuda/lib64/libnccl.so.2 /usr/local/cuda/targets/*/lib/libnccl.so.2 \
                 /opt/*/.venv/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2 \
                 /usr/local/lib/python3*/dist-packages/nvidia/nccl/lib/libnccl.so.2; do
            [ -z "$f" ] && [ -e "$g" ] && f=$g
        done
        [ -z "$f" ] && f=$(timeout 60 find / -xdev -name libnccl.so.2 2>/dev/null | head -n 1)
        [ -n "$f" ] && nccl=$(dirname "$f")
    fi
    [ -n "$nccl" ] || missing="$missing libnccl.so.2"
    # one node: Hydra forks its proxy and talks to it over loopback
    export PATH=$bundle/bin:$PATH HWLOC_PLUGINS_PATH=$bundle/lib/hwloc HYDRA_LAUNCHER=fork HYDRA_USE_LOCALHOST=1
    export LD_LIBRARY_PATH=$bundle/lib${nccl:+:$nccl}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    echo "NCCL from ${nccl:-nowhere}: $(ls -l "$nccl"/libnccl.so.2* 2>/dev/null | sed -nE 's/.* (\S+ -> \S+|\S+)$/\1/p' | tr '\n' ' ')"
    [ -n "$missing" ] && finish "missing:$missing" 3
else
    for t in nvidia-smi mpicc mpirun autoreconf make pkg-config; do command -v $t >/dev/null || missing="$missing $t"; done
    for m in ucx hwloc; do pkg-config --exists $m 2>/dev/null || missing="$missing $m(pkg-config)"; done
    ls /usr/local/cuda/include/nccl.h >/dev/null 2>&1 || missing="$missing nccl.h(/usr/local/cuda)"
    [ -n "$missing" ] && finish "missing:$missing; nothing was built (tests/gpu/pack.sh packs a build for such a node)" 3
    cd "$top"
    echo "=== build (Open MPI, CUDA and NCCL from /usr/local/cuda)"
    timeout 400 scripts/build.sh openmpi >"$out/logs/build.log" 2>&1 || { tail -20 "$out/logs/build.log"; finish "build failed" 1; }
    B=$top/build-openmpi MPIRUN=mpirun FLAVOR=openmpi
    grep -E '^#define FR_HAVE_(CUDA|NCCL) ' "$B/config.h"
    timeout 200 make -C "$B/tests" gpu/test_device gpu/nccl_plugin_load mpi/test_zcopy mpi/test_cma >"$out/logs/build_tests.log" 2>&1 ||
        { tail -20 "$out/logs/build_tests.log"; finish "the GPU test programs did not build" 1; }
    export LD_LIBRARY_PATH=$B/lib/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
# a bundle holds the real programs; a build tree, libtool's wrappers
prog() { if [ -x "$B/$1" ]; then echo "$B/$1"; else echo "$B/${2:-$1}"; fi; }
"$(prog bin/fastreduce-info tools/fastreduce-info)" 2>&1 | head -12
# one launcher line for both MPIs: Open MPI's mpirun exports only what -x names
launch_x=()   # more variables Open MPI's mpirun is to export (-x NAME ...)
launch() {  # launch SECONDS NP PROGRAM ARGS...
    local t=$1 np=$2; shift 2
    if [ "$FLAVOR" = openmpi ]; then
        timeout "$t" "$MPIRUN" --bind-to none -x FASTREDUCE_DEBUG -x FASTREDUCE_DEBUG_SUBSYS -x NCCL_DEBUG -x NCCL_DEBUG_SUBSYS \
            -x LD_LIBRARY_PATH -x FASTREDUCE_LIB -x PYTHONPATH "${launch_x[@]}" -np "$np" "$@"
    else
        timeout "$t" "$MPIRUN" -n "$np" "$@"
    fi
}

echo "=== the plugin's unit tests (no GPU needed; only where Criterion is installed)"
if [ -z "$bundle" ] && pkg-config --exists criterion; then
    timeout 120 make -C "$B/tests" unit/test_nccl_tuner >/dev/null 2>&1 &&
        (cd "$B/tests" && timeout 60 ./unit/test_nccl_tuner 2>&1 | tail -1)
else
    echo "(Criterion absent or a bundle: skipped; make check runs it)"
fi

# GPU_CHECK_PARTS: which parts run, and on which shapes (default all of them)
parts=",${GPU_CHECK_PARTS:-plugin,tests,osu,tune,host,zcopy,cma,observe,torch,one,fake},"
part() { [[ $parts == *",$1,"* ]]; }
ngpu=$(nvidia-smi -L | grep -c '^GPU')
max=${GPU_CHECK_MAX:-64M}
fmax=${GPU_CHECK_FAKE_MAX:-64K}
# The shapes of the device runs, four words each (ranks, largest size, log
# tag, launch wrapper): one rank per GPU; and where there is a single GPU,
# also two ranks on it faked as two nodes (fake_nodes.sh), the one way one
# GPU holds an NCCL communicator of several ranks (its ring and tree, over
# sockets on loopback, slow but real, and the tuner asked per call)
shapes=(); part one && shapes+=("$ngpu" "$max" "" "")
[ "$ngpu" = 1 ] && part fake && shapes+=(2 "$fmax" -fake "$here/fake_nodes.sh")
what() { [ -n "$1" ] && echo "2 ranks on the GPU as 2 nodes (NCCL over sockets)" || echo "$ngpu rank(s)"; }

if part plugin; then
echo "=== NCCL alone: NCCL_TUNER_PLUGIN=fastreduce in a program that only calls NCCL"
# (with one GPU NCCL's single-rank path never asks a tuner: this shows the
#  plugin loaded; its forcing is what unit/test_nccl_tuner and the faked
#  nodes below show)
NCCL_TUNER_PLUGIN=fastreduce NCCL_DEBUG=INFO \
    NCCL_DEBUG_SUBSYS=INIT,TUNING FASTREDUCE_TUNE="allreduce cuda * * 0-64K nccl_tree; allreduce cuda * * 64K-inf nccl_ring proto=simple" \
    timeout 60 "$B/tests/gpu/nccl_plugin_load" >"$out/logs/plugin_load.log" 2>&1
echo "exit $?"
grep -iE 'tuner|fastreduce|nccl_plugin_load' "$out/logs/plugin_load.log" | head -20
fi

if part tests; then
for ((i = 0; i < ${#shapes[@]}; i += 4)); do
    fake=0; [ -n "${shapes[i + 3]}" ] && fake=1
    echo "=== device-buffer tests (tests/gpu/run_gpu.sh), $(what "${shapes[i + 3]}")"
    (cd "$B/tests" && top_builddir=.. MPIEXEC="$MPIRUN" FR_MPI_FLAVOR=$FLAVOR FR_TEST_LOGDIR="$out/logs/gpu" \
        FR_GPU_FAKE_NODES=$fake timeout "${GPU_CHECK_TESTS_S:-300}" bash "$here/run_gpu.sh") 2>&1 |
        grep -E '^(PASS|FAIL|SKIP)|passed, |^    '
    echo "exit ${PIPESTATUS[0]}"
done
fi

# fr_osu_allreduce -d cuda: our columns, and per size rank 0's choice beside NCCL's TUNING line
# (faked nodes share the GPU by time slices: milliseconds a call, so few of them)
osu_cuda() {  # TAG NP MAX [WRAPPER]
    local tag=$1 np=$2 m=$3 log=$out/logs/osu_cuda$1.log few=(); shift 3
    [ $# -gt 0 ] && few=(-i 10 -x 2 --blocks 3)
    FASTREDUCE_DEBUG=INFO FASTREDUCE_DEBUG_SUBSYS=COLL,NCCL NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING \
        launch 180 "$np" "$@" "$(prog benchmarks/fr_osu_allreduce)" -d cuda -m "4:$m" "${few[@]}" \
        --compare table,nccl,nccl_ring,nccl_tree >"$log" 2>&1
    echo "exit $?"
    grep -vE 'INFO|^\[|^ *$' "$log" | head -50
    echo "--- per size: ours (rank 0's choice for the table column) beside NCCL's TUNING line (none at 1 rank)"
    grep -E ':0 fastreduce INFO #[0-9]+ allreduce' "$log" |
        sed -nE 's/.* allreduce ([0-9]+) bytes .* -> ([a-z_]+) .*/\1 \2/p' | sort -n -u -k1,1 >"$out/logs/ours$tag.txt"
    grep -E 'AllReduce: [0-9]+ Bytes' "$log" |
        sed -nE 's/.*AllReduce: ([0-9]+) Bytes -> (.*)/\1 \2/p' | sort -n -u -k1,1 >"$out/logs/nccl$tag.txt"
    join -a1 "$out/logs/ours$tag.txt" "$out/logs/nccl$tag.txt" | head -30
    echo "--- the plugin's decisions, and NCCL's algorithms and protocols, over every call of every column"
    grep -hE 'fastreduce tuner' "$log" | sed -E 's/^.*fastreduce tuner: //; s/ of [0-9]+ bytes/ of N bytes/' |
        sort | uniq -c | sort -rn | head -8
    grep -E 'AllReduce: [0-9]+ Bytes' "$log" | sed -nE 's/.* -> (Algo [A-Z_]+ proto [A-Z0-9]+).*/\1/p' | sort | uniq -c
}

# fastreduce-tune -d cuda, then --check of what it wrote
tune_cuda() {  # TAG NP BUDGET MAX [WRAPPER]
    local tag=$1 np=$2 tb=$3 m=$4; shift 4
    launch $((tb + 60)) "$np" "$@" "$(prog tools/fastreduce-tune)" -d cuda -b "$tb" -m "$m" -q \
        -o "$out/logs/gpu$tag.tune" >"$out/logs/tune$tag.log" 2>&1
    echo "exit $?"
    tail -n 5 "$out/logs/tune$tag.log"
    grep -vE '^ *$' "$out/logs/gpu$tag.tune" 2>/dev/null | head -40
    launch $((tb + 60)) "$np" "$@" "$(prog tools/fastreduce-tune)" -d cuda --check "$out/logs/gpu$tag.tune" \
        -b "$tb" -m "$m" -q >"$out/logs/tune_check$tag.log" 2>&1
    echo "exit $? (3: a stale range)"
    grep -E '^(STALE|ok) ' "$out/logs/tune_check$tag.log" | head -30
    tail -n 2 "$out/logs/tune_check$tag.log"
}

if part osu; then
    for ((i = 0; i < ${#shapes[@]}; i += 4)); do
        echo "=== fr_osu_allreduce -d cuda, $(what "${shapes[i + 3]}"), 4 B to ${shapes[i + 1]}: the table's choice, NCCL's own, ring and tree forced"
        osu_cuda "${shapes[i + 2]}" "${shapes[i]}" "${shapes[i + 1]}" ${shapes[i + 3]:+"${shapes[i + 3]}"}
    done
    if part one; then
        echo "=== fr_osu_bcast -d cuda on $ngpu rank(s), 4 B to $max: the table's choice beside NCCL's broadcast"
        launch 120 "$ngpu" "$(prog benchmarks/fr_osu_bcast)" -d cuda -m "4:$max" --compare table,nccl \
            >"$out/logs/osu_bcast_cuda.log" 2>&1
        echo "exit $?"
        grep -vE 'INFO|^\[|^ *$' "$out/logs/osu_bcast_cuda.log" | head -40
    fi
fi

if part tune; then
    tb=${GPU_CHECK_TUNE_S:-60}
    for ((i = 0; i < ${#shapes[@]}; i += 4)); do
        echo "=== fastreduce-tune -d cuda, $(what "${shapes[i + 3]}"), to ${shapes[i + 1]}, budget $tb s: the cuda rows it writes, then --check of them"
        tune_cuda "${shapes[i + 2]}" "${shapes[i]}" "$tb" "${shapes[i + 1]}" ${shapes[i + 3]:+"${shapes[i + 3]}"}
    done
fi

if part host; then
    echo "=== host buffers on this node, 2 and 8 ranks, ours beside $FLAVOR's own (fr_osu_allreduce --vs-mpi)"
    for np in 2 8; do
        launch 60 "$np" "$(prog benchmarks/fr_osu_allreduce)" -m 4:64M -i 50 -x 5 --vs-mpi >"$out/logs/osu_host_np$np.log" 2>&1
        echo "np=$np exit $?"
        grep -vE '^ *$' "$out/logs/osu_host_np$np.log" | head -40
    done
fi
if part zcopy; then
    # the host's many cores: zero-copy (fr_mem_alloc buffers) beside the copy
    # path and the node's MPI on MPI_Alloc_mem buffers, launched in turn, and
    # the zero-copy tests at the larger rank counts (issue 29's many-core figures)
    echo "=== zero-copy on this node's cores: --mem fr --vs-mpi and --mem malloc, np 2, 8, 16; test_zcopy np 8, 16"
    for np in 2 8 16; do
        for coll in allreduce bcast; do
            for mem in fr malloc; do
                lg="$out/logs/zcopy_${coll}_np${np}_$mem.log"
                launch 90 "$np" "$(prog benchmarks/fr_osu_$coll)" -m 4:16M -i 30 -x 3 --mem $mem \
                    $([ $mem = fr ] && echo --vs-mpi) >"$lg" 2>&1
                echo "$coll np=$np --mem $mem exit $?"
                grep -E '^[0-9]|Largest' "$lg" | awk '{print "  " $0}' | head -30
            done
        done
    done
    for np in 8 16; do
        launch 300 "$np" "$(prog tests/mpi/test_zcopy)" --quick >"$out/logs/test_zcopy_np$np.log" 2>&1
        echo "test_zcopy np=$np exit $?: $(grep -E 'passed' "$out/logs/test_zcopy_np$np.log" | tail -1)"
    done
fi
if part cma; then
    # the one-copy bcast of private root buffers (FASTREDUCE_CMA) where each
    # rank has a core: its range, measured on this VM's 2 cores only, beside
    # the copy path (=0), OSU's way and with the root rewriting its buffer
    echo "=== bcast by cma on this node's cores: FASTREDUCE_CMA=1 and 0 in turn, --barrier and --rewrite, np 2, 8, 16; test_cma np 8, 16"
    launch_x=(-x FASTREDUCE_CMA)
    for np in 2 8 16; do
        for how in barrier rewrite; do
            for c in 1 0; do
                lg="$out/logs/cma_np${np}_${how}_$c.log"
                FASTREDUCE_CMA=$c launch 90 "$np" "$(prog benchmarks/fr_osu_bcast)" -m 8K:4M -i 30 -x 3 --$how \
                    --vs-mpi >"$lg" 2>&1
                echo "np=$np --$how FASTREDUCE_CMA=$c exit $?"
                grep -E '^[0-9]' "$lg" | awk '{print "  " $0}' | head -20
            done
        done
    done
    launch_x=()
    for np in 8 16; do
        launch 300 "$np" "$(prog tests/mpi/test_cma)" --quick >"$out/logs/test_cma_np$np.log" 2>&1
        echo "test_cma np=$np exit $?: $(grep -E 'passed' "$out/logs/test_cma_np$np.log" | tail -1)"
    done
fi
if part observe; then
    # issue 30 on device buffers: the timeline's and the metrics' calls with memory cuda
    echo "=== observing device calls: FASTREDUCE_TIMELINE and FASTREDUCE_METRICS=file: on fr_osu_allreduce -d cuda, $ngpu rank(s)"
    mkdir -p "$out/logs/observe"
    launch_x=(-x FASTREDUCE_TIMELINE -x FASTREDUCE_METRICS)
    FASTREDUCE_TIMELINE="$out/logs/observe/t.%r.json" FASTREDUCE_METRICS="file:$out/logs/observe/m.%r.prom" \
        launch 120 "$ngpu" "$(prog benchmarks/fr_osu_allreduce)" -d cuda -m 4:1M -i 10 -x 2 --blocks 3 \
        >"$out/logs/observe/osu.log" 2>&1
    echo "exit $?"
    launch_x=()
    python3 - "$out/logs/observe" <<'EOF'
import glob, json, re, sys
d = sys.argv[1]
for f in sorted(glob.glob(d + "/t.*.json")):
    text = open(f).read().rstrip().rstrip(",")
    ev = json.loads(text if text.endswith("]") else text + "]")
    calls = [e for e in ev if e.get("cat") == "collective"]
    cuda = [e for e in calls if e["args"].get("memory") == "cuda"]
    algs = sorted({e["args"]["algorithm"] for e in cuda})
    print("%s: %d calls, %d on device buffers (%s), %d phases" % (f, len(calls), len(cuda), " ".join(algs),
          sum(1 for e in ev if e.get("cat") == "phase")))
for f in sorted(glob.glob(d + "/m.*.prom")):
    n = sum(float(l.split()[-1]) for l in open(f) if l.startswith("fastreduce_collective_calls_total") and 'memory="cuda"' in l)
    print("%s: %d calls with memory=\"cuda\"" % (f, n))
EOF
fi
if part torch; then
    py=${GPU_CHECK_PYTHON:-python3}
    lib=$(prog lib/libfastreduce.so lib/.libs/libfastreduce.so)
    echo "=== the Python package on CUDA tensors (tests/gpu/test_torch_gpu.py), $ngpu rank(s), $py"
    if ! "$py" -c "import torch, mpi4py, pytest; assert torch.cuda.is_available()" 2>/dev/null; then
        echo "torch: skipped (no torch for CUDA, mpi4py and pytest in $py)"
    else
        pkg=$top/python; [ -n "$bundle" ] && pkg=$bundle/python
        FASTREDUCE_LIB=$lib PYTHONPATH=$pkg:$pkg/tests launch 300 "$ngpu" sh -c \
            'exec "$0" -m pytest -q -p no:cacheprovider "$1" >"$2.${OMPI_COMM_WORLD_RANK:-$PMI_RANK}" 2>&1' \
            "$py" "$here/test_torch_gpu.py" "$out/logs/torch_gpu.log"
        echo "exit $?"
        tail -3 "$out/logs/torch_gpu.log.0"
    fi
fi
finish done 0
