#!/usr/bin/env bash
# Sanitizer runs: an out-of-tree build with clang under Open MPI's wrapper
# (OMPI_CC=clang mpicc), then launches whose any report is a failure.
#  - default: ASan + UBSan in build-asan/, the Criterion unit tests and a
#    2-rank subset of the MPI tests; leaks inside MPI, UCX, hwloc and PMIx
#    are suppressed by tests/sanitize/lsan.supp (libraries only, never ours).
#  - --thread: ThreadSanitizer in build-tsan/, the MPI tests whose threads
#    share the library's state (progress threads, requests from several
#    threads, the interposer's generalized requests, the timeline's and the
#    metrics' threads); tests/sanitize/tsan.supp names the uninstrumented
#    MPI, UCX and hwloc only.
#
# Usage: scripts/sanitize.sh [--thread] [extra configure arguments]
# Environment:
#   FR_SAN_TIMEOUT=SECONDS   per launch (default 300)
#   FR_SAN_KEEP_GOING=0      stop at the first failing launch (default: run all)
# Each launch's output and sanitizer reports go to build-*/sanitize-logs/.
# Ends with the line "sanitize: N passed, M failed" ("tsan: ..." with
# --thread; one per launch); exit status 0 only when every launch passed
# with zero sanitizer reports.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
mode=address
[ "${1:-}" = --thread ] && { mode=thread; shift; }
if [ "$mode" = thread ]; then
    me=tsan; bdir=$top/build-tsan
    SAN_CFLAGS="-g -O1 -fsanitize=thread -fno-omit-frame-pointer"
    SAN_LDFLAGS="-fsanitize=thread"
else
    me=sanitize; bdir=$top/build-asan
    SAN_CFLAGS="-g -O1 -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
    SAN_LDFLAGS="-fsanitize=address,undefined"
fi
bname=${bdir#"$top"/}
TIMEOUT=${FR_SAN_TIMEOUT:-300}
KEEP_GOING=${FR_SAN_KEEP_GOING:-1}
t_start=$SECONDS

for tool in clang mpicc mpirun; do
    command -v "$tool" >/dev/null 2>&1 || { echo "$me: $tool not found (apt-get install -y clang openmpi-bin libopenmpi-dev)" >&2; exit 99; }
done
# Open MPI's wrapper compiles with clang; the same variable must hold for make.
export OMPI_CC=clang
unset CC

# ---- build -----------------------------------------------------------------
cd "$top" || exit 1
if [ ! -x configure ] || [ configure.ac -nt configure ] || [ -n "$(find . -path ./build-\* -prune -o -name Makefile.am -newer configure -print -quit)" ]; then
    mkdir -p m4
    autoreconf -fi >/dev/null 2>&1 || { echo "$me: autoreconf failed" >&2; exit 1; }
fi
if [ -f config.status ]; then
    echo "$me: the source tree is configured in place; run 'make distclean' there first (VPATH build)" >&2
    exit 1
fi
mkdir -p "$bdir"
cd "$bdir" || exit 1
# No CUDA: the sanitizers' shadow memory and the CUDA driver do not mix.
args="MPICC=mpicc CFLAGS=$SAN_CFLAGS LDFLAGS=$SAN_LDFLAGS --without-cuda --without-nccl $*"
if [ ! -f config.status ] || [ ../configure -nt config.status ] || [ "$(cat .configure-args 2>/dev/null)" != "$args" ]; then
    if ! ../configure MPICC=mpicc CFLAGS="$SAN_CFLAGS" LDFLAGS="$SAN_LDFLAGS" --without-cuda --without-nccl "$@" \
            >configure.out 2>&1; then
        tail -20 configure.out; echo "$me: configure failed ($bname/configure.out)"; exit 1
    fi
    echo "$args" >.configure-args
fi
grep -q '^CC = mpicc' Makefile && grep -q clang config.log || { echo "$me: configure did not pick clang through mpicc" >&2; exit 1; }
if ! make -j"$(nproc)" >make.out 2>&1 || ! make -j"$(nproc)" check TESTS= >>make.out 2>&1; then
    grep -E 'error|Error' make.out | head -20; echo "$me: build failed ($bname/make.out)"; exit 1
fi
# Built without sanitizers: it only keeps MPI's and PMIx's plugins mapped.
[ -x tests/unit/test_reduce ] || echo "$me: Criterion not found: unit tests skipped (apt-get install -y libcriterion-dev)"
mkdir -p sanitize
clang -shared -fPIC -O1 -o sanitize/libnodlclose.so "$top/tests/sanitize/nodlclose.c" || exit 1
echo "$me: built $bname ($(clang --version | head -n 1)) in $((SECONDS - t_start)) s"

# ---- sanitizer settings ----------------------------------------------------
LOGROOT=$bdir/sanitize-logs
rm -rf "$LOGROOT"; mkdir -p "$LOGROOT"
SUPP=$top/tests/sanitize/lsan.supp
NODLCLOSE=$bdir/sanitize/libnodlclose.so
. "$top/scripts/env.sh"
unset FASTREDUCE_ALGO FASTREDUCE_TUNE FASTREDUCE_TUNE_FILE FASTREDUCE_NODE_SIZE FASTREDUCE_BIND \
      FASTREDUCE_REPORT_BINDINGS FASTREDUCE_TOPO_XML FASTREDUCE_UCX_TLS
export FASTREDUCE_TUNE_PATH=
# set per launch: log_path=<its folder>/san (each process writes san.<pid> on a report)
asan_base="halt_on_error=1:abort_on_error=0:exitcode=23:detect_leaks=1:fast_unwind_on_malloc=0:malloc_context_size=40"
asan_base+=":strict_string_checks=1:check_initialization_order=1:detect_stack_use_after_return=1:allocator_may_return_null=1"
ubsan_base="halt_on_error=1:print_stacktrace=1:report_error_type=1:exitcode=24"
lsan_base="suppressions=$SUPP:print_suppressions=0:exitcode=23"
# (every report, not only the first: one launch can show several races; an
# allocation refused returns NULL, as the library expects, and as ASan's
# options say too: test_reqfault caps a rank's memory)
tsan_base="suppressions=$top/tests/sanitize/tsan.supp:halt_on_error=0:exitcode=25:history_size=4:allocator_may_return_null=1"

npass=0; nfail=0; nlaunch=0; failed_list=()

# finish NAME KIND RC DIR SECONDS: judges one launch. KIND: unit (Criterion's
# synthesis line), mpi (the "X passed, Y failed" line of testutil.h) or plain
# (exit status only). Any non-empty sanitizer log in DIR is a failure.
finish() {
    local name=$1 kind=$2 rc=$3 dir=$4 dt=$5
    local log=$dir/out.log reports line ok=1 note=""
    reports=$(find "$dir" -name 'san.*' -size +0 | wc -l)
    if [ "$kind" = unit ]; then
        line=$(grep -E 'Synthesis: Tested: ' "$log" | tail -n 1 | sed 's/.*Synthesis: //; s/ *$//')
        echo "$line" | grep -qE 'Failing: 0 \| Crashing: 0' || ok=0
    elif [ "$kind" = plain ]; then  # a program without a summary line: its exit status
        line="$(wc -l <"$log") lines of output"
    else
        line=$(grep -E '^[a-z_]+( [a-z-]+)* np=[0-9]+: [0-9]+ passed, [0-9]+ failed$' "$log" | tail -n 1)
        echo "$line" | grep -qE ' 0 failed$' || ok=0
    fi
    [ -n "$line" ] || note+=" no summary line;"
    [ "$rc" = 0 ] || { ok=0; note+=" exit status $rc;"; }
    [ "$rc" = 124 ] || [ "$rc" = 137 ] && note+=" TIMEOUT after $TIMEOUT s;"
    [ "$reports" = 0 ] || { ok=0; note+=" $reports sanitizer report(s);"; }
    if [ "$ok" = 1 ]; then
        npass=$((npass + 1)); echo "PASS: $name (${dt} s): $line"
    else
        nfail=$((nfail + 1)); failed_list+=("$name")
        echo "FAIL: $name (${dt} s): ${line:-no result} [${note# }]  logs: ${dir#"$top"/}"
        grep -hE '^(FAIL|TIMEOUT)' "$log" | head -n 10 | sed 's/^/    /'
        local f
        for f in $(find "$dir" -name 'san.*' -size +0 | head -n 3); do
            echo "    --- ${f#"$top"/}"
            grep -E 'ERROR: |runtime error|SUMMARY|^    #[0-9]' "$f" | head -n 25 | sed 's/^/    /'
        done
        [ "$reports" = 0 ] && tail -n 15 "$log" | sed 's/^/    /'
        [ "$KEEP_GOING" = 1 ] || { echo "$me: $npass passed, $nfail failed"; exit 1; }
    fi
}

newdir() {  # newdir NAME: a fresh folder for one launch, its path in $dir
    nlaunch=$((nlaunch + 1))
    dir=$LOGROOT/$(printf '%02d' "$nlaunch")-${1//[^A-Za-z0-9=._-]/_}
    mkdir -p "$dir"
}

san_env() {  # the sanitizer variables for one launch, reports into $dir
    export ASAN_OPTIONS="$asan_base:log_path=$dir/san"
    export UBSAN_OPTIONS="$ubsan_base:log_path=$dir/san"
    export LSAN_OPTIONS="$lsan_base"
    export TSAN_OPTIONS="$tsan_base:log_path=$dir/san"
}

# ---- MPI tests at 2 ranks ----------------------------------------------------
# run_mpi [--plain] NAME "VAR=value ..." PROGRAM ARGS...
run_mpi() {
    local kind=mpi
    [ "$1" = --plain ] && { kind=plain; shift; }
    local name=$1 envs=$2 prog=$3; shift 3
    newdir "$name"; san_env
    local e xs=(-x ASAN_OPTIONS -x UBSAN_OPTIONS -x LSAN_OPTIONS -x TSAN_OPTIONS -x FASTREDUCE_TUNE_PATH -x "LD_PRELOAD=$NODLCLOSE")
    for e in $envs; do xs+=(-x "${e%%=*}"); done
    local t0=$SECONDS rc
    # shellcheck disable=SC2086
    (cd "$bdir/tests" && env $envs timeout -k 15 "$TIMEOUT" mpirun --oversubscribe --mca btl self,vader \
        --bind-to none "${xs[@]}" -n 2 "mpi/$prog" "$@" </dev/null >"$dir/out.log" 2>&1)
    rc=$?
    finish "np=2 ${envs:+$envs }$prog${*:+ $*}" "$kind" "$rc" "$dir" $((SECONDS - t0))
}

# ---- ASan + UBSan: the unit tests, then MPI tests at 2 ranks -------------------
address_runs() {
    for t in test_reduce test_tune test_api test_tune_choose test_nccl_tuner; do
        [ -x "$bdir/tests/unit/$t" ] || continue
        newdir "unit-$t"; san_env
        t0=$SECONDS
        (cd "$bdir/tests" && LD_PRELOAD=$NODLCLOSE timeout -k 15 "$TIMEOUT" "unit/$t" --jobs=1 </dev/null >"$dir/out.log" 2>&1)
        finish "unit/$t" unit $? "$dir" $((SECONDS - t0))
    done

    # Every host algorithm forced in turn (test_coll makes one communicator per
    # algorithm and checks each ran): shm runs on one node, hier on two faked ones.
    run_mpi coll "" test_coll --quick
    run_mpi coll-split "FASTREDUCE_NODE_SIZE=1" test_coll --quick
    # the full counts too (1000003 and 8 Mi elements): the chunked paths, several
    # chunks per step, double-buffered shared memory (about 10 s each under ASan)
    run_mpi coll-full "" test_coll
    run_mpi coll-split-full "FASTREDUCE_NODE_SIZE=1" test_coll
    # hier's traffic between the faked nodes on TCP sockets rather than shared memory
    run_mpi coll-split-tcp "FASTREDUCE_NODE_SIZE=1 FASTREDUCE_UCX_TLS=tcp,self" test_coll --quick --algo hier
    run_mpi args "" test_args
    # ranks that disagree (FASTREDUCE_CHECK) and a rank skipping a collective
    # under FASTREDUCE_TIMEOUT, every algorithm: the error and broken paths
    run_mpi fault "" test_fault
    # requests in flight with every host algorithm forced, grouped calls, both
    # ways of running them; misused handles and a rank that skips a request
    run_mpi requests "FASTREDUCE_PROGRESS=thread" test_requests --quick
    run_mpi requests-caller "FASTREDUCE_PROGRESS=caller" test_requests --quick
    run_mpi reqfault "" test_reqfault
    # memory of fr_mem_alloc: zero-copy calls, peers' mappings, frees and the recovery path
    run_mpi zcopy "" test_zcopy --quick
    # observing calls: the timeline's ring and writer thread, the metrics' HTTP
    # endpoint and textfile thread, the late-rank report's reductions, failures
    run_mpi observe "FASTREDUCE_TIMELINE=$LOGROOT/tl.%r.json FASTREDUCE_METRICS=file:$LOGROOT/m.%r.prom,http:19471 FASTREDUCE_STATS=1" \
        observe_job --calls 10 --failures
    # FASTREDUCE_ALGO / FASTREDUCE_TUNE / tables, each selection run and checked
    run_mpi select "" test_select
    # every host algorithm's communicator made, used and destroyed, twice over
    run_mpi comm-loop "" comm_loop 2
    # binding at fr_comm_create (topology/)
    run_mpi bind "FASTREDUCE_BIND=core" test_bind
    # the PMPI interposer (lib/interpose.c), linked in, with its statistics at MPI_Finalize
    run_mpi --plain interposer "FASTREDUCE_STATS=1" mpi_program_linked
    # its MPI_Iallreduce and MPI_Ibcast, served through generalized requests
    run_mpi nb-interposer "FASTREDUCE_STATS=1" mpi_nb_program_linked multiple
    # FASTREDUCE_ALGO from the environment, for every host algorithm by name
    for a in ring recursive_doubling rabenseifner tree shm hier mpi binomial scatter_allgather pipeline; do
        case $a in hier) envs="FASTREDUCE_NODE_SIZE=1 FASTREDUCE_ALGO=allreduce=hier,bcast=hier" ;;
                   shm|mpi) envs="FASTREDUCE_ALGO=allreduce=$a,bcast=$a" ;;
                   *) envs="FASTREDUCE_ALGO=$a" ;; esac
        run_mpi "algo-$a" "$envs" test_coll --quick --algo default
    done
}

# ---- ThreadSanitizer: the tests whose threads share the library's state ------
thread_runs() {
    # requests run by the progress thread, and by the caller below
    # MPI_THREAD_MULTIPLE; requests on several communicators from several threads
    run_mpi requests "FASTREDUCE_PROGRESS=thread" test_requests --quick
    run_mpi requests-caller "FASTREDUCE_PROGRESS=caller" test_requests --quick
    run_mpi requests-funneled "FASTREDUCE_PROGRESS=thread" test_requests --quick --thread-level funneled
    run_mpi reqfault "" test_reqfault
    run_mpi idle "" test_idle
    # communicators made, used and destroyed by several threads at once
    run_mpi threads "FASTREDUCE_SPIN=20" test_threads --rounds 2 --calls 20
    # the interposer's generalized requests, completed by the progress thread,
    # and communicators freed while another thread tests
    run_mpi nb-interposer "FASTREDUCE_STATS=1" mpi_nb_program_linked multiple
    run_mpi nb-free-tested "" mpi_nb_program_linked multiple --free-tested
    # the timeline's writer and the metrics' endpoint and textfile threads
    run_mpi observe "FASTREDUCE_TIMELINE=$LOGROOT/tl.%r.json FASTREDUCE_METRICS=file:$LOGROOT/m.%r.prom,http:19472 FASTREDUCE_STATS=1" \
        observe_job --calls 10 --failures
    run_mpi zcopy "" test_zcopy --quick
}

if [ "$mode" = thread ]; then thread_runs; else address_runs; fi

echo "$me: $nlaunch launches in $((SECONDS - t_start)) s, logs in ${LOGROOT#"$top"/}${failed_list[*]:+; failed: ${failed_list[*]}}"
echo "$me: $npass passed, $nfail failed"
[ "$nfail" = 0 ]
