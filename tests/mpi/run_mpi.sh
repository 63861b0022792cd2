#!/bin/bash
# The `make check` driver of the multi-rank tests: launches test_coll,
# test_args, test_select, soak, test_threads and the others under $MPIEXEC
# at several rank counts, with and without a faked node split, each under a
# timeout, and sums their "X passed, Y failed" lines into a final plain line "N passed, M failed".
#
# Environment (set by tests/Makefile.am):
#   MPIEXEC         launcher (mpirun for Open MPI, mpiexec.mpich for MPICH)
#   FR_MPI_FLAVOR   openmpi | mpich
#   top_builddir    the build tree's top, relative to the current directory
# Optional:
#   FASTREDUCE_TEST_QUICK=1   every test_coll launch with --quick
#   FR_TEST_TIMEOUT=SECONDS   per launch (default 300)
#   FR_TEST_LOGDIR=DIR        where each launch's output goes (default mpi-logs)
#   FR_TEST_FULL_NP="1 2 3 4" rank counts that run test_coll in full
#   FR_MPIEXEC_FLAGS          extra launcher flags
#   FR_TEST_SMOKE=1           only a few launches (make distcheck)
#   FR_TEST_ONLY=nb           only the interposer's non-blocking launches (nb_suite)
#   FR_TEST_ONLY=bench        only the benchmarks' and the trainer's checks (bench_suite)
# Exit status: 0 if every launch passed, 1 if any failed or timed out,
# 99 if the test programs are missing.
set -u

MPIEXEC=${MPIEXEC:-mpirun}
FLAVOR=${FR_MPI_FLAVOR:-openmpi}
top_builddir=${top_builddir:-..}
BIN=${FR_TEST_BINDIR:-$top_builddir/tests/mpi}
TIMEOUT=${FR_TEST_TIMEOUT:-300}
LOGDIR=${FR_TEST_LOGDIR:-mpi-logs}
FULL_NP=${FR_TEST_FULL_NP:-1 2 3 4}
QUICK=${FASTREDUCE_TEST_QUICK:-0}
[ "$QUICK" = 0 ] && QUICK=
EXTRA=${FR_MPIEXEC_FLAGS:-}

for p in test_coll test_zcopy test_cma test_args test_select test_setup test_bind test_fakedev test_fault test_kill test_threads test_idle test_requests test_reqfault soak mpi_program mpi_program_linked mpi_nb_program skip_program; do
    if [ ! -x "$BIN/$p" ]; then
        echo "run_mpi.sh: $BIN/$p not found (build with make check, or set top_builddir)" >&2
        exit 99
    fi
done
if ! command -v "$MPIEXEC" >/dev/null 2>&1; then
    echo "run_mpi.sh: launcher '$MPIEXEC' not found" >&2
    exit 99
fi
mkdir -p "$LOGDIR"

# We run as root in CI and oversubscribe 2 cores.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
# A stray setting from the caller would change what the tests select.
unset FASTREDUCE_ALGO FASTREDUCE_TUNE FASTREDUCE_TUNE_FILE FASTREDUCE_NODE_SIZE FASTREDUCE_BIND \
      FASTREDUCE_REPORT_BINDINGS FASTREDUCE_TOPO_XML
# No site table from an installed share/fastreduce/ either.
export FASTREDUCE_TUNE_PATH=

total_pass=0
total_fail=0
launch_fail=0
nlaunch=0
summary_re='^(test_[a-z]+|soak) np=[0-9]+: [0-9]+ passed, [0-9]+ failed$'
nskip=0

# launcher VAR...: LAUNCH=(the launcher and, for Open MPI, its flags, with
# -x for each variable named; FR_BTL=LIST for other btls than self,vader)
launcher() {
    LAUNCH=("$MPIEXEC")
    [ "$FLAVOR" = openmpi ] || return 0
    LAUNCH+=(--oversubscribe --mca btl "${FR_BTL:-self,vader}" --bind-to none)
    local v
    for v in "$@"; do LAUNCH+=(-x "$v"); done
}

# run_one NP "VAR=value ..." PROGRAM ARGS...
# With MPMD="N:VAR=value N:VAR=value ..." set, one launch of application
# contexts of N ranks each (NP in all), each with its own setting (-x for
# Open MPI, -env for MPICH's mpiexec), rather than NP ranks alike.
run_one() {
    local np=$1 envs=$2 prog=$3
    shift 3
    local args="$*"
    nlaunch=$((nlaunch + 1))
    local tag
    tag=$(printf '%02d-%s-np%d%s%s%s' "$nlaunch" "$prog" "$np" "${MPMD:+-mpmd-${MPMD//[^A-Za-z0-9]/_}}" \
          "${envs:+-${envs//[^A-Za-z0-9]/_}}" "${args:+-${args//[^A-Za-z0-9]/_}}")
    local log="$LOGDIR/$tag.log"
    last_log=$log
    local e names=()
    for e in $envs; do names+=("${e%%=*}"); done
    launcher "${names[@]}"
    # shellcheck disable=SC2206
    local launcher=("${LAUNCH[@]}" $EXTRA) ctx set
    # shellcheck disable=SC2206
    local apps=(-n "$np" ${RUN_WRAP:-} "$BIN/$prog" $args)
    if [ -n "${MPMD:-}" ]; then
        apps=()
        for ctx in $MPMD; do
            set=${ctx#*:}
            [ ${#apps[@]} = 0 ] || apps+=(:)
            if [ "$FLAVOR" = openmpi ]; then apps+=(-n "${ctx%%:*}" -x "$set")
            else apps+=(-n "${ctx%%:*}" -env "${set%%=*}" "${set#*=}"); fi
            # shellcheck disable=SC2206
            apps+=(${RUN_WRAP:-} "$BIN/$prog" $args)
        done
    fi
    local t0=$SECONDS rc
    # shellcheck disable=SC2086
    env $envs timeout -k 15 "$TIMEOUT" "${launcher[@]}" "${apps[@]}" </dev/null >"$log" 2>&1
    rc=$?
    local dt=$((SECONDS - t0))
    local line what="np=$np ${MPMD:+MPMD $MPMD }${envs:+$envs }$prog${args:+ $args}"
    # exit status 77: the program cannot run here (test_threads without MPI_THREAD_MULTIPLE)
    if [ "$rc" = 77 ]; then
        nskip=$((nskip + 1))
        echo "SKIP: $what (${dt} s): $(grep -m1 'SKIP' "$log")"
        return 0
    fi
    line=$(grep -E "$summary_re" "$log" | tail -n 1)
    local ok=1 note=""
    if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
        ok=0
        note="TIMEOUT after ${TIMEOUT} s"
    fi
    if [ -n "$line" ]; then
        local p f
        p=$(echo "$line" | sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed$/\1/')
        f=$(echo "$line" | sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed$/\2/')
        total_pass=$((total_pass + p))
        total_fail=$((total_fail + f))
        [ "$f" -gt 0 ] && ok=0
        if [ "$rc" != 0 ] && [ "$f" = 0 ] && [ "$ok" = 1 ]; then
            ok=0
            note="exit status $rc although no test failed"
            total_fail=$((total_fail + 1))
        fi
    else
        ok=0
        total_fail=$((total_fail + 1))  # the launch itself counts as one failure
        [ -z "$note" ] && note="no summary line (exit status $rc)"
    fi
    # a launch that printed its summary and then hung still counts as a failure
    if [ -n "$line" ] && { [ "$rc" = 124 ] || [ "$rc" = 137 ]; }; then
        total_fail=$((total_fail + 1))
    fi
    if [ "$ok" = 1 ]; then
        echo "PASS: $what (${dt} s): $line"
    else
        launch_fail=$((launch_fail + 1))
        echo "FAIL: $what (${dt} s): ${line:-no result}${note:+ [$note]}  log: $log"
        grep -E '^(FAIL|TIMEOUT)' "$log" | head -n 40 | sed 's/^/    /'
        local nf
        nf=$(grep -cE '^(FAIL|TIMEOUT)' "$log")
        [ "$nf" -gt 40 ] && echo "    ... $((nf - 40)) more FAIL lines in $log"
        if ! grep -qE '^(FAIL|TIMEOUT)' "$log"; then
            tail -n 15 "$log" | sed 's/^/    /'
        fi
    fi
}

is_full() {
    [ -n "$QUICK" ] && return 1
    local n
    for n in $FULL_NP; do [ "$n" = "$1" ] && return 0; done
    return 1
}

# ranks_in [LO] < LOG_LINES: how many ranks (of LO or above) the log lines
# come from (their prefix is host:pid:rank)
ranks_in() {
    cut -d' ' -f1 | awk -F: -v lo="${1:-0}" '$NF >= lo { print $NF }' | sort -u | wc -l
}

pass_fail() {  # pass_fail OK "what"
    if [ "$1" = 1 ]; then echo "PASS: $2"; total_pass=$((total_pass + 1))
    else echo "FAIL: $2"; total_fail=$((total_fail + 1)); launch_fail=$((launch_fail + 1)); fi
}

echo "run_mpi.sh: $FLAVOR via $MPIEXEC, programs in $BIN, logs in $LOGDIR, timeout ${TIMEOUT} s${QUICK:+, quick}"
t_start=$SECONDS

# FR_TEST_SMOKE=1 (make distcheck, whose point is the tarball): a few
# launches only; the suite itself runs in the build trees.
smoke_suite() {
    run_one 2 "" test_coll --quick
    run_one 3 "" test_args
    run_one 2 "" test_fault
}

# nb_suite: the interposer's MPI_Iallreduce and MPI_Ibcast (mpi/nb_suite.sh)
. "$(dirname "$0")/nb_suite.sh"
# bench_suite: the benchmarks' scripts and programs, and the trainer (mpi/bench_suite.sh)
. "$(dirname "$0")/bench_suite.sh"

full_suite() {

for np in 1 2 3 4 5 6; do
    if is_full "$np"; then run_one "$np" "" test_coll; else run_one "$np" "" test_coll --quick; fi
done
for np in 2 3 4 5 6; do
    run_one "$np" "FASTREDUCE_NODE_SIZE=2" test_coll --quick
done
# Zero-copy on buffers of fr_mem_alloc, every rank count; and with the
# requests run by the caller rather than the progress thread.
for np in 1 2 3 4 5 6; do
    if is_full "$np"; then run_one "$np" "" test_zcopy; else run_one "$np" "" test_zcopy --quick; fi
done
run_one 3 "FASTREDUCE_PROGRESS=caller" test_zcopy --quick
# huge pages reserved for the run (as root, where none are): fr_mem_alloc
# takes them for large buffers, which peers map as they map any
hp=/proc/sys/vm/nr_hugepages
if [ -w "$hp" ] && [ "$(cat "$hp")" = 0 ] && echo 64 >"$hp" 2>/dev/null && [ "$(cat "$hp")" -ge 8 ]; then
    run_one 2 "" test_zcopy --quick
    pass_fail "$(grep -q 'test_zcopy: huge pages: used' "$last_log" && echo 1 || echo 0)" \
        "test_zcopy with $(cat "$hp") huge pages reserved: they were used (log: $last_log)"
    echo 0 >"$hp"
else
    nskip=$((nskip + 1))
    echo "SKIP: huge pages for fr_mem_alloc (cannot reserve any here: not root, or some are reserved already)"
fi
# The bcast by cma (one copy from the root's private buffer): where the
# ranks have a core each (np=2 here), where they share cores only with
# FASTREDUCE_CMA=always (the test knows the rule), never with 0 on any rank
# (an MPMD launch: the node agrees), by requests run by the caller, and
# never across faked nodes (hier). The copy path keeps its coverage of
# those sizes: test_coll with cma off.
for np in 1 2 3 4 5 6; do
    if [ "$np" = 2 ]; then run_one "$np" "" test_cma; else run_one "$np" "" test_cma --quick; fi
done
run_one 4 "FASTREDUCE_CMA=always" test_cma
run_one 6 "FASTREDUCE_CMA=always" test_cma --quick
run_one 2 "FASTREDUCE_CMA=0 FR_TEST_NO_CMA=1" test_cma --quick
MPMD="1:FASTREDUCE_CMA=1 1:FASTREDUCE_CMA=0" run_one 2 "FR_TEST_NO_CMA=1" test_cma --quick
MPMD="2:FASTREDUCE_CMA=always 1:FASTREDUCE_CMA=1" run_one 3 "FR_TEST_NO_CMA=1" test_cma --quick
run_one 2 "FASTREDUCE_PROGRESS=caller" test_cma --quick
run_one 4 "FASTREDUCE_NODE_SIZE=2 FASTREDUCE_UCX_TLS=tcp,self" test_cma --quick
run_one 2 "FASTREDUCE_CMA=0" test_coll --quick
# hier's node stages zero-copy, over faked nodes (5: unequal, hier declines)
for np in 4 5 6; do
    run_one "$np" "FASTREDUCE_NODE_SIZE=2 FASTREDUCE_UCX_TLS=tcp,self" test_zcopy --quick
done
run_one 6 "FASTREDUCE_NODE_SIZE=3 FASTREDUCE_UCX_TLS=tcp,self" test_zcopy --quick
# the slices cross the nodes from and into shared memory that UCX has
# registered (ucp_mem_map), on every rank
run_one 4 "FASTREDUCE_NODE_SIZE=2 FASTREDUCE_UCX_TLS=tcp,self FASTREDUCE_DEBUG=INFO FASTREDUCE_DEBUG_SUBSYS=UCX" \
    test_zcopy --quick
nreg=$(grep -E "fastreduce INFO UCX: registered [0-9]+ bytes of shared memory \(fr_mem_alloc\) for transfers$" \
       "$last_log" | ranks_in)
pass_fail "$([ "$nreg" = 4 ] && echo 1 || echo 0)" "hier on shared buffers: $nreg of 4 ranks registered them with UCX (log: $last_log)"
# Streaming stores into the shared segment, forced (FASTREDUCE_SHM_STREAM=1,
# what auto picks while plain stores run slow): shm at every count, and the
# node stages of hier.
for np in 2 3 4 5 6; do
    run_one "$np" "FASTREDUCE_SHM_STREAM=1" test_coll --algo shm
done
run_one 4 "FASTREDUCE_SHM_STREAM=1 FASTREDUCE_NODE_SIZE=2" test_coll --quick --algo hier
# The auto switch itself: with auto:0 every timed plain put of over 200 ns
# counts as slow (4 KiB ones take about 300 ns here), so a rank goes over to
# streaming stores after two puts, within a run and within a call: results
# before and after the switch, and the switch logged.
run_one 3 "FASTREDUCE_SHM_STREAM=auto:0 FASTREDUCE_DEBUG=TRACE FASTREDUCE_DEBUG_SUBSYS=SHM" test_coll --quick --algo shm
nsw=$(grep -cE 'fastreduce TRACE .*shm: a plain put of [0-9]+ bytes took [0-9]+ ns .*: streaming stores from now$' "$last_log")
pass_fail "$([ "$nsw" -gt 0 ] && echo 1 || echo 0)" "np=3 FASTREDUCE_SHM_STREAM=auto:0: $nsw switches to streaming stores logged (log: $last_log)"
# Results are written with streaming stores from a rank's share of the
# node's last-level caches, which hwloc reports: cpu-only.xml has two L3 of
# 32 MiB, so 3 ranks stream from 64 MiB / 3; one-core.xml gives no cache
# sizes, and then 8 MiB is used. The results of 8 Mi elements fall both sides
# of the first, and the log says what was used.
for fx in cpu-only:22369621 one-core:8388608; do
    fxname=${fx%%:*} fxmin=${fx#*:}
    run_one 3 "FASTREDUCE_TOPO_XML=${srcdir:-$(dirname "$0")/..}/topologies/$fxname.xml FASTREDUCE_DEBUG=INFO FASTREDUCE_DEBUG_SUBSYS=SHM" \
        test_coll --algo shm
    # every segment line (one per rank and communicator) says so, from all 3 ranks
    nseg=$(grep -c "fastreduce INFO shm segment " "$last_log")
    nst=$(grep -E "fastreduce INFO shm segment .* results of $fxmin bytes or more are streamed " "$last_log" |
          tee "$last_log.st" | wc -l)
    nrk=$(ranks_in <"$last_log.st")
    pass_fail "$([ "$nseg" -gt 0 ] && [ "$nst" = "$nseg" ] && [ "$nrk" = 3 ] && echo 1 || echo 0)" \
        "np=3 $fxname.xml: $nst of $nseg segment lines, from $nrk of 3 ranks, stream results from $fxmin bytes (log: $last_log)"
done
# FASTREDUCE_SHM_SIZE set differently on some ranks (an MPMD launch, or
# mpirun -x for some): every rank lays out the node's segment by the
# communicator's rank 0's value, and each rank whose own differs warns,
# once however many communicators it makes. Before, they laid it out
# differently: wrong results, hangs, SIGBUS past the segment's end. Here
# inside a node (shm's chunked allreduce to 1.1 MB, bcast to 9 MB through
# the large ring); below across faked nodes (hier bcast's chunk cap).
# mpmd_setting VAR N0 VALUE0 N1 VALUE1 "VAR=value ..." WARNING_RE TEST_COLL_ARGS...:
# VAR=VALUE0 on the first N0 ranks, VALUE1 on the next N1; each of those
# must log WARNING_RE once.
mpmd_setting() {
    local var=$1 n0=$2 s0=$3 n1=$4 s1=$5 envs=$6 re=$7 nw nr
    shift 7
    MPMD="$n0:$var=$s0 $n1:$var=$s1" run_one $((n0 + n1)) "$envs" test_coll "$@"
    nw=$(grep -E "$re" "$last_log" | tee "$last_log.warn" | wc -l)
    nr=$(ranks_in "$n0" <"$last_log.warn")
    pass_fail "$([ "$nw" = "$n1" ] && [ "$nr" = "$n1" ] && echo 1 || echo 0)" \
        "MPMD $var=$s0 on $n0 rank(s), $s1 on $n1: $nw warning(s), from $nr of ranks $n0-$((n0 + n1 - 1)), want one from each (log: $last_log)"
}
# mpmd_shm_size N0 SIZE0 N1 SIZE1 "VAR=value ..." TEST_COLL_ARGS...
mpmd_shm_size() {
    local n0=$1 s0=$2 n1=$3 s1=$4 envs=$5
    shift 5
    mpmd_setting FASTREDUCE_SHM_SIZE "$n0" "$s0" "$n1" "$s1" "$envs" \
        "fastreduce WARN shm: FASTREDUCE_SHM_SIZE is [0-9]+ bytes on this rank \(set to $s1\) but [0-9]+ on the communicator's rank 0" "$@"
}
mpmd_shm_size 1 4M 2 16M "" --quick --algo shm
# Ranks in PID namespaces of their own (containers that share IPC but not
# PIDs; mpi/pidns_wrap.sh): the creator's /proc/<pid>/fd/<n> names a file
# of the opener's own namespace, here a decoy. Every other rank must see it
# is not the segment (st_dev and st_ino) and the node take the /dev/shm way:
# results right, the decoy untouched. (Our UCX and Open MPI on TCP: their
# shared-memory ways go by pid too.)
if unshare --pid --fork --mount-proc --kill-child true 2>/dev/null; then
    decoy="$(cd "$LOGDIR" && pwd)/pidns.decoy"
    head -c 65536 /dev/urandom >"$decoy"
    sum0=$(cksum <"$decoy")
    FR_BTL=self,tcp RUN_WRAP="${srcdir:-$(dirname "$0")/..}/mpi/pidns_wrap.sh" run_one 3 \
        "FR_DECOY=$decoy FASTREDUCE_UCX_TLS=tcp,self FASTREDUCE_DEBUG=INFO FASTREDUCE_DEBUG_SUBSYS=SHM" test_coll --quick --algo shm
    nr=$(grep -E "fastreduce INFO shm: /proc/1/fd/[0-9]+ is not the segment local rank 0 made \(Stale file handle\)$" \
         "$last_log" | ranks_in)
    nf=$(grep -c "fastreduce INFO shm: memfd sharing failed (Stale file handle); using a /dev/shm segment" "$last_log")
    same=0; [ "$(cksum <"$decoy")" = "$sum0" ] && same=1
    pass_fail "$([ "$nr" = 2 ] && [ "$nf" -ge 3 ] && [ "$same" = 1 ] && echo 1 || echo 0)" \
        "PID namespaces: $nr of ranks 1-2 found /proc/1/fd/N not the segment, $nf fallbacks to /dev/shm logged, decoy unchanged: $same (log: $last_log)"
    # There the ranks cannot open each other's memfds: fr_mem_alloc buffers
    # take the copy path, with the same results. (Without the algorithms
    # over UCX: after ours had connected the ranks over TCP, MPICH's own
    # MPI_Finalize at times hung in its UCX progress there.)
    FR_BTL=self,tcp RUN_WRAP="${srcdir:-$(dirname "$0")/..}/mpi/pidns_wrap.sh" run_one 3 \
        "FR_TEST_NO_ZCOPY=1 FASTREDUCE_UCX_TLS=tcp,self" test_zcopy --quick --no-forced
    pass_fail "$(grep -q 'test_zcopy np=3: zero-copy is not possible here' "$last_log" && echo 1 || echo 0)" \
        "PID namespaces: test_zcopy found zero-copy not possible (log: $last_log)"
    # Nor can they read each other by cma: the same pids name other
    # processes there (with FASTREDUCE_CMA=always, which would use it on
    # these shared cores). With address randomisation the trial copy finds
    # no memory at the peer's address; without it (setarch -R) the rank
    # reads itself and must see another word than the peer's.
    FR_BTL=self,tcp RUN_WRAP="${srcdir:-$(dirname "$0")/..}/mpi/pidns_wrap.sh" run_one 3 \
        "FR_TEST_NO_CMA=1 FASTREDUCE_CMA=always FASTREDUCE_UCX_TLS=tcp,self" test_cma --quick
    if setarch "$(uname -m)" -R true 2>/dev/null; then
        FR_BTL=self,tcp RUN_WRAP="setarch $(uname -m) -R ${srcdir:-$(dirname "$0")/..}/mpi/pidns_wrap.sh" run_one 3 \
            "FR_TEST_NO_CMA=1 FASTREDUCE_CMA=always FASTREDUCE_UCX_TLS=tcp,self FASTREDUCE_DEBUG=INFO FASTREDUCE_DEBUG_SUBSYS=SHM" \
            test_cma --quick
        nr=$(grep -E "fastreduce INFO cma: cannot read local rank [0-9]+'s memory \(found another word\)" "$last_log" | ranks_in)
        pass_fail "$([ "$nr" -ge 1 ] && echo 1 || echo 0)" \
            "PID namespaces without address randomisation: $nr rank(s) found another word at the peer's address (log: $last_log)"
    else
        nskip=$((nskip + 1))
        echo "SKIP: setarch -R (address randomisation cannot be turned off here)"
    fi
else
    nskip=$((nskip + 1))
    echo "SKIP: ranks in PID namespaces of their own (unshare --pid --mount-proc is refused here)"
fi
for np in 1 2 3; do
    run_one "$np" "" test_args
done
for np in 2 3 4; do
    run_one "$np" "" test_select
done
# UCX made at the first call that needs it, on every rank alike: after
# calls without it, on one node and across faked nodes (hier across nodes
# of 2), failing on one rank, reached late under a timeout
for np in 1 2 3; do
    run_one "$np" "" test_setup
done
run_one 2 "FASTREDUCE_NODE_SIZE=1" test_setup
run_one 4 "FASTREDUCE_NODE_SIZE=2" test_setup
# Many calls on the world and on communicators made and destroyed all along:
# results, and no growth of the resident set, descriptors or segments.
run_one 2 "" soak --short
# MPI_THREAD_MULTIPLE: a communicator per thread, 4 threads at once (and
# creation, destruction and the FR_* cache from threads); the spin is short,
# as 4 threads a rank spinning on 2 cores would starve the others.
for np in 2 3; do
    run_one "$np" "FASTREDUCE_SPIN=20" test_threads
done
# Requests with nothing queued: a progress thread per communicator (none
# with FASTREDUCE_PROGRESS=caller), asleep: no CPU over idle seconds.
run_one 2 "" test_idle
run_one 2 "FASTREDUCE_PROGRESS=caller" test_idle
# Non-blocking and grouped collectives (mpi/test_requests.c): every host
# algorithm forced with many requests in flight, grouped allreduces at three
# fusion sizes, threads with requests on communicators of their own; at np 1
# to 6 with the progress thread and with FASTREDUCE_PROGRESS=caller, then at
# the thread levels below multiple (where the thread leaves a request that
# calls MPI to the caller).
# (caller at fewer rank counts: MPICH's spinning ranks make each launch slow)
for np in 1 2 3 4 5 6; do
    run_one "$np" "FASTREDUCE_PROGRESS=thread" test_requests
done
for np in 1 2 3 5; do
    run_one "$np" "FASTREDUCE_PROGRESS=caller" test_requests
done
for lv in single funneled serialized; do
    run_one 3 "FASTREDUCE_PROGRESS=thread" test_requests --thread-level $lv
    run_one 2 "FASTREDUCE_PROGRESS=caller" test_requests --thread-level $lv
done
# FASTREDUCE_CHECK's agreement is an MPI call: below multiple the thread
# leaves every request to the caller
run_one 3 "FASTREDUCE_PROGRESS=thread FASTREDUCE_CHECK=1" test_requests --quick --thread-level funneled
# Requests misused (mpi/test_reqfault.c): stale and invented handles, bad
# arguments, FR_ERR_PENDING, FASTREDUCE_CHECK, a rank skipping a request
# under FASTREDUCE_TIMEOUT.
for np in 1 2 3; do
    for p in thread caller; do run_one "$np" "FASTREDUCE_PROGRESS=$p" test_reqfault; done
done
# (on faked nodes of a rank each, where hier's slice is the whole message:
# its scratch without memory)
run_one 2 "FASTREDUCE_NODE_SIZE=1" test_reqfault
# Ranks that do not call alike: FASTREDUCE_CHECK mismatches, and a rank
# skipping a collective under FASTREDUCE_TIMEOUT with every algorithm
# (also with our UCX on TCP sockets, where a peer's gone endpoint shows)
for np in 1 2 3; do
    run_one "$np" "" test_fault
done
is_full 4 && run_one 4 "" test_fault
run_one 3 "FASTREDUCE_UCX_TLS=tcp,self" test_fault

# A rank SIGKILLed in the middle of large allreduces (mpi/test_kill.c): every
# survivor reports FR_ERR_TIMED_OUT (or UCX's error) within the timeout + 2 s,
# destroys its communicator and leaves; nothing of ours stays in /dev/shm.
# With --requests the rank dies with requests in flight (both progress modes).
# Open MPI keeps the survivors running with orte_enable_recovery; MPICH
# 4.0's hydra kills them even with -disable-auto-cleanup (docs/reliability.md).
kill_one() {  # kill_one NP "VAR=value ..." ALGO [TEST_KILL_ARGS...]
    local np=$1 envs=$2 algo=$3 dir="$LOGDIR/kill-$1-$3-${2//[^A-Za-z0-9]/_}${4:+-${4//[^A-Za-z0-9]/_}}"
    shift 3
    rm -rf "$dir"; mkdir -p "$dir"
    local before after names=(FR_KILL_OUT) e
    before=$(ls /dev/shm 2>/dev/null | sort)
    for e in $envs; do names+=("${e%%=*}"); done
    launcher "${names[@]}"
    # shellcheck disable=SC2086
    env $envs FR_KILL_OUT="$dir" timeout -k 5 60 "${LAUNCH[@]}" --mca orte_enable_recovery 1 -n "$np" \
        "$BIN/test_kill" --algo "$algo" "$@" </dev/null >"$dir/out.log" 2>&1
    after=$(ls /dev/shm 2>/dev/null | sort)
    local ok_lines left
    ok_lines=$(cat "$dir"/survivor.* 2>/dev/null | grep -c ': OK: ')
    left=$(comm -13 <(echo "$before") <(echo "$after") | grep -c fastreduce)
    local ok=0; [ "$ok_lines" = $((np - 1)) ] && [ "$left" = 0 ] && ok=1
    pass_fail $ok "np=$np ${envs:+$envs }test_kill --algo $algo${1:+ $*}: $ok_lines of $((np - 1)) survivors reported and left; fastreduce entries left in /dev/shm: $left"
    [ $ok = 1 ] || { cat "$dir"/survivor.* 2>/dev/null; tail -n 15 "$dir/out.log"; } | sed 's/^/    /'
}
if [ "$FLAVOR" = openmpi ]; then
    kill_one 3 "" shm
    kill_one 3 "" ring
    kill_one 3 "FASTREDUCE_UCX_TLS=tcp,self" ring
    kill_one 4 "FASTREDUCE_UCX_TLS=tcp,self FASTREDUCE_NODE_SIZE=2" hier
    kill_one 3 "FASTREDUCE_PROGRESS=thread" shm --requests
    # zero-copy: the victim's memory is mapped by the others when it dies
    kill_one 3 "" shm --shared
    kill_one 3 "FASTREDUCE_PROGRESS=thread" shm --shared --requests
    kill_one 3 "FASTREDUCE_PROGRESS=caller FASTREDUCE_UCX_TLS=tcp,self" ring --requests
else
    echo "SKIP: test_kill under $FLAVOR (its launcher ends the survivors when a rank is killed)"
fi
# device pointers without a GPU, through a stand-in CUDA driver
for np in 1 3; do
    run_one "$np" "FR_TEST_FAKE_CUDA=$BIN/fakecuda/libcuda.so.1" test_fakedev
done
# The hierarchical algorithms on faked nodes (FASTREDUCE_NODE_SIZE), with
# our UCX traffic on TCP sockets (FASTREDUCE_UCX_TLS: UCX_TLS would also steer MPICH's
# own UCX, whose MPI_Finalize can hang on TCP) so the network path really runs: 2 and 3
# nodes of 1 to 3 ranks, and unequal nodes (where hier allreduce declines).
TCP="FASTREDUCE_UCX_TLS=tcp,self"
run_one 4 "$TCP FASTREDUCE_NODE_SIZE=2" test_coll --algo hier
run_one 2 "$TCP FASTREDUCE_NODE_SIZE=1" test_coll --algo hier
run_one 3 "$TCP FASTREDUCE_NODE_SIZE=1" test_coll --quick --algo hier
run_one 6 "$TCP FASTREDUCE_NODE_SIZE=3" test_coll --quick --algo hier
run_one 6 "$TCP FASTREDUCE_NODE_SIZE=2" test_coll --quick --algo hier
run_one 5 "$TCP FASTREDUCE_NODE_SIZE=2" test_coll --quick --algo hier
# FASTREDUCE_NODE_SIZE set on some ranks only, or to another value: every
# rank groups nodes by the communicator's rank 0's value, and each rank
# whose own differs warns, once. Before, ranks with and without it made
# different MPI calls inside fr_comm_create (a hang), and ranks with
# different values counted different nodes and chose different algorithms.
# mpmd_node_size N0 SIZE0 N1 SIZE1 TEST_COLL_ARGS...
mpmd_node_size() {
    local n0=$1 s0=$2 n1=$3 s1=$4
    shift 4
    mpmd_setting FASTREDUCE_NODE_SIZE "$n0" "$s0" "$n1" "$s1" "$TCP" \
        "fastreduce WARN FASTREDUCE_NODE_SIZE \(or fr_config_t.node_size\) is $s1 on this rank but $s0 on the communicator's rank 0" "$@"
}
mpmd_node_size 1 0 2 1 --quick --algo shm
mpmd_node_size 1 2 3 1 --quick --algo hier
run_one 5 "$TCP FASTREDUCE_NODE_SIZE=3" test_coll --quick --algo hier
RUN_WRAP="${srcdir:-$(dirname "$0")/..}/mpi/hostid_wrap.sh" run_one 4 "$TCP" test_coll --quick --algo hier
# nodes whose ranks were given different FASTREDUCE_SHM_SIZE (each node's
# alike): hier bcast's chunks are at most a 2-rank node's slot, 256K less
# its header at 1M, so the nodes cut messages alike only by rank 0's value
mpmd_shm_size 2 1M 2 16M "$TCP FASTREDUCE_NODE_SIZE=2" --quick --algo hier
# bcast chunks over 256K: the ring's slots a message takes turns in change
# with its size (algorithms/shm_steps.c, bcast_slots), in shm and in hier's
# node stage
echo "bcast host * * * shm chunk=1M" >"$LOGDIR/bcast-shm-1M.table"
echo "bcast host * * * hier chunk=512K" >"$LOGDIR/bcast-hier-512K.table"
run_one 3 "FASTREDUCE_TUNE_FILE=$LOGDIR/bcast-shm-1M.table" test_coll --quick --algo default
run_one 4 "$TCP FASTREDUCE_NODE_SIZE=2 FASTREDUCE_TUNE_FILE=$LOGDIR/bcast-hier-512K.table" test_coll --quick --algo default
# hier's stage between nodes chosen by the table (across=), at every size
for a in rd ring; do
    echo "allreduce host * * * hier across=$a" >"$LOGDIR/hier-$a.table"
done
run_one 4 "$TCP FASTREDUCE_NODE_SIZE=1 FASTREDUCE_TUNE_FILE=$LOGDIR/hier-rd.table" test_coll --quick --algo default
run_one 4 "$TCP FASTREDUCE_NODE_SIZE=2 FASTREDUCE_TUNE_FILE=$LOGDIR/hier-ring.table" test_coll --quick --algo default
# hier's pipeline (a chunk's ring across the nodes runs under its neighbours'
# shm steps) with many chunks: 16K ones at every count, and chunks of 8 bytes
# (one or two elements, so most slices are empty)
for c in 16K 8; do
    echo "allreduce host * * * hier chunk=$c" >"$LOGDIR/hier-chunk$c.table"
done
run_one 4 "$TCP FASTREDUCE_NODE_SIZE=2 FASTREDUCE_TUNE_FILE=$LOGDIR/hier-chunk16K.table" test_coll --algo default
run_one 6 "$TCP FASTREDUCE_NODE_SIZE=2 FASTREDUCE_TUNE_FILE=$LOGDIR/hier-chunk16K.table" test_coll --quick --algo default
run_one 6 "$TCP FASTREDUCE_NODE_SIZE=3 FASTREDUCE_TUNE_FILE=$LOGDIR/hier-chunk8.table" test_coll --quick --algo default

# Binding on this machine: each rank's affinity against the plan, worked out
# by test_bind from /sys; with FASTREDUCE_REPORT_BINDINGS=1 every rank prints
# one line. Faked nodes do not change binding (it is about the machine).
run_one 4 "FASTREDUCE_BIND=core FASTREDUCE_REPORT_BINDINGS=1" test_bind
nbind=$(grep -cE "fastreduce BIND host .* rank [0-9]+ local [0-9]+/4 bind core: cpus [0-9]" "$last_log")
if [ "$nbind" = 4 ]; then
    echo "PASS: FASTREDUCE_REPORT_BINDINGS=1 printed one line per rank"; total_pass=$((total_pass + 1))
else
    echo "FAIL: FASTREDUCE_REPORT_BINDINGS=1 printed $nbind binding lines for 4 ranks"
    total_fail=$((total_fail + 1)); launch_fail=$((launch_fail + 1))
fi
run_one 3 "FASTREDUCE_BIND=numa" test_bind
run_one 2 "FASTREDUCE_BIND=none" test_bind
run_one 6 "FASTREDUCE_BIND=core FASTREDUCE_NODE_SIZE=2" test_bind
# A first communicator over half of the node (the odd or even ranks) binds
# nothing; the world's after it binds every rank by its place on the node.
run_one 4 "FASTREDUCE_BIND=core" test_bind --split-first
# Under a CPU mask (taskset, as a launcher's or a batch system's) the plan
# hands out only the CPUs the node's ranks started with: here one CPU,
# shared by both ranks (test_bind's plan starts from the rank's affinity).
if command -v taskset >/dev/null 2>&1 && taskset -c 1 true 2>/dev/null; then
    RUN_WRAP="taskset -c 1" run_one 2 "FASTREDUCE_BIND=core" test_bind
    RUN_WRAP="taskset -c 0" run_one 2 "FASTREDUCE_BIND=numa" test_bind
else
    nskip=$((nskip + 1))
    echo "SKIP: FASTREDUCE_BIND under taskset (no taskset, or no CPU 1 here)"
fi
# A launcher's binding kept (two-numa-nics.xml: PU 0, mlx5_0 and mlx5_1 on
# NUMA 0; PU 1, mlx5_2 and mlx5_3 on NUMA 1): a rank gets a NIC of the NUMA
# node it runs on, the NUMA node's NICs dealt among the ranks there (not
# among all the node's ranks). Both ranks on CPU 0, on CPU 1, then rank l
# on CPU l (mpi/cpu_wrap.sh).
if command -v taskset >/dev/null 2>&1 && taskset -c 0 true 2>/dev/null && taskset -c 1 true 2>/dev/null; then
    for wrap in "taskset -c 0:0 1" "taskset -c 1:2 3" "${srcdir:-$(dirname "$0")/..}/mpi/cpu_wrap.sh:0 2"; do
        want=(${wrap##*:})
        RUN_WRAP=${wrap%:*} run_one 2 "FASTREDUCE_REPORT_BINDINGS=1 FASTREDUCE_TOPO_XML=${srcdir:-$(dirname "$0")/..}/topologies/two-numa-nics.xml" test_bind
        nnic=0
        for r in 0 1; do
            grep -qE "fastreduce BIND host .* rank $r local $r/2 bind none: cpus .* nic mlx5_${want[$r]} " "$last_log" && nnic=$((nnic + 1))
        done
        pass_fail "$([ "$nnic" = 2 ] && echo 1 || echo 0)" "np=2 two-numa-nics.xml under $(basename "${wrap%%:*}" | cut -d' ' -f1-3): $nnic of 2 ranks given mlx5_${want[0]} and mlx5_${want[1]} (log: $last_log)"
    done
else
    nskip=$((nskip + 1))
    echo "SKIP: the NIC of a launcher-bound rank (no taskset, or no CPUs 0 and 1 here)"
fi
run_one 2 "FASTREDUCE_BIND=auto" test_bind
run_one 3 "FASTREDUCE_BIND=gpu" test_bind
run_one 2 "FASTREDUCE_BIND=gpu FASTREDUCE_TOPO_XML=${srcdir:-$(dirname "$0")/..}/topologies/dgx-8gpu.xml" test_bind
# HWLOC_THISSYSTEM=1 makes hwloc trust an XML file; it is still another
# machine's, never applied (one-core.xml would bind every rank to CPU 0).
run_one 2 "FASTREDUCE_BIND=core HWLOC_THISSYSTEM=1 FASTREDUCE_TOPO_XML=${srcdir:-$(dirname "$0")/..}/topologies/one-core.xml" test_bind
# GPUs with and without CUDA devices (gpu-mixed-cuda.xml: cuda0 and cuda1 on
# NUMA 1, two GPUs without one on NUMA 0): each rank is given a CUDA GPU by
# its CUDA index, near it, with the RoCE NIC beside them; CUDA_VISIBLE_DEVICES
# is already applied in hwloc's CUDA devices, so it changes nothing.
run_one 2 "FASTREDUCE_BIND=gpu FASTREDUCE_REPORT_BINDINGS=1 CUDA_VISIBLE_DEVICES=2,3 FASTREDUCE_TOPO_XML=${srcdir:-$(dirname "$0")/..}/topologies/gpu-mixed-cuda.xml" test_bind
ngb=0
for r in 0 1; do
    grep -qE "fastreduce BIND host .* rank $r local $r/2 bind gpu: cpus .* numa 1 gpu $r nic mlx5_0 " "$last_log" && ngb=$((ngb + 1))
done
pass_fail "$([ "$ngb" = 2 ] && echo 1 || echo 0)" "np=2 gpu-mixed-cuda.xml: $ngb of 2 ranks given cuda0/cuda1 on NUMA 1 with mlx5_0 (log: $last_log)"
# CUDA_VISIBLE_DEVICES per rank (mpi/cvd_wrap.sh): every rank's GPU is its
# cuda0, yet local rank l's is GPU 2l of dgx-8gpu.xml, on NUMA l/2 beside
# mlx5_l, and two ranks share each NUMA node's 8 cores (cores 4l..4l+3:
# PUs 4l..4l+3 and their hyperthreads 4l+16..). The ranks name their GPUs
# to each other by PCI bus id.
mkdir -p "$LOGDIR/cvd"
RUN_WRAP="${srcdir:-$(dirname "$0")/..}/mpi/cvd_wrap.sh" run_one 4 "FASTREDUCE_BIND=gpu FASTREDUCE_REPORT_BINDINGS=1 \
FR_CVD_DIR=$LOGDIR/cvd FR_CVD_SRC=${srcdir:-$(dirname "$0")/..}/topologies/dgx-8gpu.xml" test_bind
ngb=0
for r in 0 1 2 3; do
    pus="$((4 * r))-$((4 * r + 3)),$((4 * r + 16))-$((4 * r + 19))"
    grep -qE "fastreduce BIND host .* rank $r local $r/4 bind gpu: .* numa $((r / 2)) gpu 0 nic mlx5_$r .*; planned cpus $pus\)" \
        "$last_log" && ngb=$((ngb + 1))
done
pass_fail "$([ "$ngb" = 4 ] && echo 1 || echo 0)" "np=4 one GPU per rank: $ngb of 4 ranks planned near their GPU (log: $last_log)"

# Nodes named per rank with FASTREDUCE_HOSTID, interleaved (0,2,4 | 1,3,5).
SRCDIR=${srcdir:-$(dirname "$0")/..}
for np in 3 4; do
    RUN_WRAP="$SRCDIR/mpi/hostid_wrap.sh" run_one "$np" "" test_coll --quick
done
# Ids that differ only past their 64th character name two nodes.
long=rack01-chassis02-blade03-a-very-long-kubernetes-pod-name-0123456789abcdefghij-
RUN_WRAP="$SRCDIR/mpi/hostid_wrap.sh" run_one 2 "FR_HOSTID_PREFIX=$long FASTREDUCE_DEBUG=INFO" test_bind
pass_fail "$(grep -q "communicator of 2 ranks on 2 node(s)" "$last_log" && echo 1 || echo 0)" \
    "np=2 FASTREDUCE_HOSTID=${long}node0|node1: 2 nodes (log: $last_log)"

# The PMPI interposer under an ordinary MPI program (mpi/mpi_program.c): run
# plain, with LD_PRELOAD=libfastreduce-mpi.so (set for the program only, not
# the launcher) and linked with it, the results must be the same, line for
# line (sorted: split communicators print from several ranks), and
# FASTREDUCE_STATS=1 must show calls served by fastreduce and calls passed
# to MPI, and every communicator cached for a freed one destroyed.
PRELOAD=$(cd "$top_builddir/lib/.libs" 2>/dev/null && pwd)/libfastreduce-mpi.so
idir="$LOGDIR/interpose"
rm -rf "$idir"; mkdir -p "$idir"
ilaunch() {  # ilaunch NP OUT ERR [VAR=value ...] -- PROGRAM ARGS...
    local np=$1 out=$2 err=$3; shift 3
    local envs=()
    while [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
    launcher FASTREDUCE_TUNE_PATH
    env "${envs[@]}" timeout -k 15 "$TIMEOUT" "${LAUNCH[@]}" -n "$np" "$@" </dev/null >"$out" 2>"$err"
}
for np in 2 3; do
    ilaunch $np "$idir/plain$np.out" "$idir/plain$np.err" -- "$BIN/mpi_program"
    rc1=$?
    ilaunch $np "$idir/pre$np.out" "$idir/pre$np.err" -- env FASTREDUCE_STATS=1 LD_PRELOAD="$PRELOAD" "$BIN/mpi_program"
    rc2=$?
    ilaunch $np "$idir/link$np.out" "$idir/link$np.err" -- env FASTREDUCE_STATS=1 "$BIN/mpi_program_linked"
    rc3=$?
    lines=$(grep -c ' same on all ranks$' "$idir/plain$np.out")
    bad=$(cat "$idir"/{plain,pre,link}$np.out | grep -cv ' ok [0-9a-f]\{16\} same on all ranks$')
    same=0
    cmp -s <(sort "$idir/plain$np.out") <(sort "$idir/pre$np.out") && cmp -s <(sort "$idir/plain$np.out") <(sort "$idir/link$np.out") && same=1
    ok=0; [ "$rc1$rc2$rc3" = 000 ] && [ "$lines" -gt 1000 ] && [ "$bad" = 0 ] && [ "$same" = 1 ] && ok=1
    pass_fail $ok "interposer np=$np: $lines results, identical plain / LD_PRELOAD / linked: $same, lines not ok: $bad (exit $rc1 $rc2 $rc3)"
    for how in pre link; do
        st="$idir/$how$np.err"
        served=$(grep -cE 'fastreduce STATS (allreduce|bcast) +fr +[a-z_]+ +[0-9]+ +[1-9]' "$st")
        passed=$(grep -cE 'fastreduce STATS (allreduce|bcast) +MPI +(op|datatype) ' "$st")
        counts=$(sed -nE 's/.*fastreduce communicators: ([0-9]+) made, ([0-9]+) freed before MPI_Finalize$/\1 \2/p' "$st")
        ok=0; [ "$served" -ge 2 ] && [ "$passed" -ge 2 ] && [ -n "$counts" ] && [ $((${counts% *} - ${counts#* })) = 1 ] && ok=1
        pass_fail $ok "interposer np=$np ($how) FASTREDUCE_STATS: $served served and $passed passed-on kinds of call; communicators made/freed: ${counts:-none}"
        # every communicator was made inside a first call: its set-up is
        # reported apart, on its own line and in the rows' setups column
        setups=$(sed -nE 's/.*fastreduce STATS communicator set-up inside the first call on each: ([0-9]+), .*/\1/p' "$st")
        col=$(awk '/fastreduce STATS (allreduce|bcast) / {n += $(NF - 1)} END {print n + 0}' "$st")
        ok=0; [ -n "$setups" ] && [ "$setups" = "${counts% *}" ] && [ "$col" = "$setups" ] && ok=1
        pass_fail $ok "interposer np=$np ($how) FASTREDUCE_STATS: set-ups ${setups:-none} (line), $col (column), communicators made ${counts% *}"
        # MPI_Alloc_mem gave fr_mem_alloc's memory, and the calls on it went
        # zero-copy; a small one, and those past half the open files, MPI's
        nal=$(grep -cE 'fastreduce STATS alloc_mem +fr +fr_mem_alloc +1 +[1-9]' "$st")
        nfree=$(grep -cE 'fastreduce STATS free_mem +fr +fr_mem_free +1 +[1-9]' "$st")
        nzc=$(grep -cE 'fastreduce STATS (allreduce|bcast) +fr +shm zero-copy +[0-9]+ +[1-9]' "$st")
        nmpi=$(grep -cE 'fastreduce STATS alloc_mem +MPI +(under 4 KiB|half the open files already) +1 +[1-9]' "$st")
        ok=0; [ "$nal" = 1 ] && [ "$nfree" = 1 ] && [ "$nzc" = 2 ] && [ "$nmpi" = 2 ] && ok=1
        pass_fail $ok "interposer np=$np ($how) FASTREDUCE_STATS: MPI_Alloc_mem rows $nal, MPI_Free_mem rows $nfree, zero-copy allreduce and bcast rows $nzc, MPI_Alloc_mem passed rows $nmpi (want 1 1 2 2)"
    done
done
# FASTREDUCE_DISABLE=1: a pass-through; the error handler gets an MPI class
ilaunch 2 "$idir/off.out" "$idir/off.err" -- env FASTREDUCE_DISABLE=1 FASTREDUCE_STATS=1 LD_PRELOAD="$PRELOAD" "$BIN/mpi_program"
rc=$?
nfr=$(grep -cE 'fastreduce STATS (allreduce|bcast) +fr ' "$idir/off.err")
ndis=$(grep -cE 'fastreduce STATS (allreduce|bcast) +MPI +FASTREDUCE_DISABLE=1 ' "$idir/off.err")
ok=0; [ "$rc" = 0 ] && cmp -s <(sort "$idir/plain2.out") <(sort "$idir/off.out") && [ "$nfr" = 0 ] && [ "$ndis" -ge 2 ] && ok=1
pass_fail $ok "interposer FASTREDUCE_DISABLE=1: same results, $nfr kinds served by fastreduce, $ndis passed as disabled"
# (no communicator was made: the lines still name the host and rank 0)
nbad=$(grep 'fastreduce STATS' "$idir/off.err" | grep -cv "^$(hostname):[0-9]*:0 fastreduce STATS")
ok=0; [ "$nbad" = 0 ] && grep -q 'fastreduce STATS' "$idir/off.err" && ok=1
pass_fail $ok "interposer FASTREDUCE_DISABLE=1 FASTREDUCE_STATS: $nbad lines without this host's name and rank 0"
# UCX that cannot be set up (a transport that does not exist) under ring,
# which needs it: the allreduces go to MPI, with the same results (UCX
# prints its own complaints on the same stream: only results compared)
ilaunch 2 "$idir/noucx.out" "$idir/noucx.err" -- env FASTREDUCE_UCX_TLS=no_such_transport FASTREDUCE_ALGO=ring \
    FASTREDUCE_STATS=1 LD_PRELOAD="$PRELOAD" "$BIN/mpi_program"
rc=$?
nno=$(grep -cE 'fastreduce STATS allreduce +MPI +fastreduce has no UCX here ' "$idir/noucx.err")
ok=0; [ "$rc" = 0 ] && [ "$nno" -ge 1 ] && cmp -s <(sort "$idir/plain2.out") \
    <(grep -E ' (same on all ranks|RANKS DIFFER)$' "$idir/noucx.out" | sort) && ok=1
pass_fail $ok "interposer without UCX (FASTREDUCE_UCX_TLS=no_such_transport, ring forced): same results, $nno kinds passed for it (exit $rc)"

ilaunch 2 "$idir/err.out" "$idir/err.err" -- env LD_PRELOAD="$PRELOAD" "$BIN/mpi_program" --errors
ok=0; grep -qE "^errors: .* returned class ([0-9]+) \(MPI_ERR_BUFFER is \1\); the error handler saw class \1$" "$idir/err.out" && ok=1
pass_fail $ok "interposer: a failed served call goes to the communicator's error handler: $(cat "$idir/err.out")"
# a rank skipping an MPI_Allreduce of an unmodified program: under the
# interposer with FASTREDUCE_TIMEOUT the others get an error class through
# the error handler instead of waiting forever (mpi/skip_program.c)
for np in 2 3; do
    ilaunch $np "$idir/skip$np.out" "$idir/skip$np.err" -- env FASTREDUCE_TIMEOUT=1 LD_PRELOAD="$PRELOAD" "$BIN/skip_program" 1
    rc=$?
    nok=$(grep -c '^skip_program rank [0-9]*: OK' "$idir/skip$np.out")
    ok=0; [ "$rc" = 0 ] && [ "$nok" = "$np" ] && ok=1
    pass_fail $ok "interposer np=$np: a rank skips MPI_Allreduce under FASTREDUCE_TIMEOUT=1: $nok of $np ranks OK (exit $rc)$(grep -h FAILED "$idir/skip$np.out" | head -3 | sed 's/^/; /')"
done
# the same program's ranks disagreeing on the count under FASTREDUCE_CHECK=1
ilaunch 3 "$idir/mismatch.out" "$idir/mismatch.err" -- env FASTREDUCE_CHECK=1 LD_PRELOAD="$PRELOAD" "$BIN/skip_program" --mismatch
rc=$?
nok=$(grep -c '^skip_program rank [0-9]*: OK' "$idir/mismatch.out")
ok=0; [ "$rc" = 0 ] && [ "$nok" = 3 ] && ok=1
pass_fail $ok "interposer np=3: MPI_Allreduce counts differ under FASTREDUCE_CHECK=1: $nok of 3 ranks got MPI_ERR_ARG through the error handler (exit $rc)$(grep -h FAILED "$idir/mismatch.out" | head -3 | sed 's/^/; /')"
nb_suite

# The Horovod-style trainer (examples/trainer): 3 epochs at 2 and 3 ranks,
# fastreduce with --overlap on and off, and mpi (on at 2 ranks, off at 3, so
# that both of its paths run); 3 ranks train a deeper model, whose middle
# layers' weights are too large to pack (FASTREDUCE_FUSION_BUFFER_MAX) and
# go as messages of their own. The loss falls; the parameters end
# bit-identical on every rank, and the same bit for bit with overlap on and
# off (the same messages in the same order; --save-params); every epoch line
# has the time split with exposed <= communication (the exposed calls lie
# within the time the reductions are in flight) and the algorithm per
# message size; the backends' final losses agree within 1e-4 relative (sums
# in another order, and avg's one division against the mpi backend's,
# change the last bits).
TRAINER=$top_builddir/examples/trainer/fr_trainer
tdata="$LOGDIR/trainer.data"
final_re='s/^fr_trainer: final loss ([0-9.]+) \(first epoch ([0-9.]+)\); parameters bit-identical on all ranks: yes$/\1 \2/p'
for np in 2 3; do
    model=() sizes="1040 4352 16640" mpiov=on
    [ $np = 3 ] && model=(--layers 4 --hidden 130) sizes="2096 67600 520 8840" mpiov=off
    for run in fastreduce-on fastreduce-off mpi-$mpiov; do
        mk=(--data "$tdata"); [ "$np$run" = 2fastreduce-on ] && mk=(--make-data "$tdata")
        ilaunch $np "$LOGDIR/trainer-$np-$run.out" "$LOGDIR/trainer-$np-$run.err" -- "$TRAINER" "${mk[@]}" \
            "${model[@]}" --epochs 3 --backend ${run%-*} --overlap ${run#*-} --save-params "$LOGDIR/trainer-$np-$run.params"
    done
    on=$LOGDIR/trainer-$np-fastreduce-on off=$LOGDIR/trainer-$np-fastreduce-off m=$LOGDIR/trainer-$np-mpi-$mpiov
    read -r lf l1f < <(sed -nE "$final_re" "$on.out")
    read -r lo l1o < <(sed -nE "$final_re" "$off.out")
    read -r lm l1m < <(sed -nE "$final_re" "$m.out")
    # epoch lines: the split, exposed <= communication, and (fastreduce) each message size's algorithm once
    epochs=$(cat "$on.out" "$off.out" "$m.out" | awk -v sizes="$sizes" '
        /^epoch / {
            if (!match($0, /data [0-9.]+%, compute [0-9.]+%, communication [0-9.]+%, exposed [0-9.]+% \([0-9]+ steps x [0-9]+ (fr_iallreduce_group|fr_allreduce_group|MPI_Iallreduce|MPI_Allreduce)\)/)) next
            split(substr($0, RSTART, RLENGTH), f, /[ %,]+/)
            if (f[8] + 0 > f[6] + 0) next
            if ($0 ~ /\(.* fr_/) {
                n = split(sizes, want, " "); got = $0; sub(/.*; fastreduce: /, "", got)
                if (split(got, alg, ", ") != n) next
                for (i = 1; i <= n; i++) if (got !~ ("(^|, )" want[i] " B -> [a-z_]+(,|$)")) next
            }
            k++
        }
        END { print k + 0 }')
    same=0; cmp -s "$on.params" "$off.params" && same=1
    ok=0
    [ -n "$lf" ] && [ "$lf $l1f" = "$lo $l1o" ] && [ "$same" = 1 ] && [ "$epochs" = 9 ] &&
        awk -v a="$lf" -v b="$l1f" 'BEGIN { exit !(a < b) }' && ok=1
    pass_fail $ok "trainer np=$np: fastreduce loss ${l1f:-?} -> ${lf:-?} (overlap on), ${l1o:-?} -> ${lo:-?} (off), final parameters identical: $same; $epochs of 9 epoch lines with the time split"
    ok=0
    [ -n "$lf" ] && [ -n "$lm" ] &&
        awk -v a="$lf" -v b="$lm" -v c="$l1m" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(b < c && d <= 1e-4 * b) }' && ok=1
    pass_fail $ok "trainer np=$np: final loss ${lf:-?} (fastreduce), ${lm:-?} (mpi, overlap $mpiov; first epoch ${l1m:-?})"
    # parameters and gradients in private memory (the copy path) rather than
    # fr_mem_alloc's (zero-copy, the default): the same bits
    ilaunch $np "$LOGDIR/trainer-$np-private.out" "$LOGDIR/trainer-$np-private.err" -- "$TRAINER" --data "$tdata" \
        "${model[@]}" --epochs 3 --mem private --save-params "$LOGDIR/trainer-$np-private.params"
    same=0; cmp -s "$on.params" "$LOGDIR/trainer-$np-private.params" && same=1
    pass_fail $same "trainer np=$np: parameters with --mem private (copy path) identical to shared memory's (zero-copy)"
    grep -hE '^epoch 3' "$on.out" "$off.out" "$m.out" | sed 's/^/    /'
done
# the benchmarks' refusals and headers, and the trainer's (mpi/bench_suite.sh)
bench_suite

# The logger: FASTREDUCE_DEBUG=INFO into FASTREDUCE_DEBUG_FILE, one file per
# process (%h host, %p pid), rank 0's naming each call's algorithm.
dbg="$LOGDIR/debug-file"
rm -rf "$dbg"; mkdir -p "$dbg"
run_one 2 "FASTREDUCE_DEBUG=INFO FASTREDUCE_DEBUG_FILE=$dbg/fr.%h.%p.log" test_coll --quick --algo shm
nfiles=$(ls "$dbg" | grep -c "^fr\.$(hostname)\.[0-9]*\.log$")
calls=$(cat "$dbg"/*.log 2>/dev/null | grep -cE ":0 fastreduce INFO #[0-9]+ (allreduce|bcast) [0-9]+ bytes .* -> [a-z_]+ \(")
if [ "$nfiles" = 2 ] && [ "$calls" -gt 10 ]; then
    echo "PASS: debug file: $nfiles files, $calls per-call lines from rank 0"; total_pass=$((total_pass + 1))
else
    echo "FAIL: debug file: $nfiles files (want 2), $calls per-call lines from rank 0 (want > 10) in $dbg"
    total_fail=$((total_fail + 1)); launch_fail=$((launch_fail + 1))
fi

# The autotuner, for real: a short run at np=2 writes a table and its CSV;
# a second job loads the table and its calls follow its rules.
TUNER=$top_builddir/tools/fastreduce-tune
OSU=$top_builddir/benchmarks/fr_osu_allreduce
tdir="$LOGDIR/tune"
rm -rf "$tdir"; mkdir -p "$tdir"
launcher FASTREDUCE_TUNE_FILE FASTREDUCE_DEBUG FASTREDUCE_DEBUG_SUBSYS
tlaunch=("${LAUNCH[@]}")
t0=$SECONDS
timeout -k 15 "$TIMEOUT" "${tlaunch[@]}" -n 2 "$TUNER" --budget 12 --max 4K -o "$tdir/t.tune" \
    </dev/null >"$tdir/tune.log" 2>&1
rc=$?
dt=$((SECONDS - t0))
rules=$(grep -cE '^(allreduce|bcast) +host +1 +2 ' "$tdir/t.tune" 2>/dev/null)
# the tuner's own clock keeps to --budget (5% allowed for a call in flight when it ends);
# the launcher's start-up and MPI_Init come on top, which a loaded machine stretches
own=$(sed -nE 's/^fastreduce-tune: [0-9]+ points measured in ([0-9.]+) s \(budget 12 s\)$/\1/p' "$tdir/tune.log")
ok=0
[ "$rc" = 0 ] && [ -n "$own" ] && awk -v t="$own" 'BEGIN { exit !(t <= 12.6) }' && [ "$dt" -le 60 ] &&
    grep -q '^# fastreduce tuning table v1$' "$tdir/t.tune" &&
    grep -qE '^# fingerprint: [^ ]+$' "$tdir/t.tune" && grep -q '^# nodes: 1$' "$tdir/t.tune" &&
    grep -q '^# ppn: 2$' "$tdir/t.tune" && grep -q '^# command: .*fastreduce-tune --budget 12' "$tdir/t.tune" &&
    [ "$rules" -ge 2 ] && ok=1
pass_fail $ok "fastreduce-tune np=2 --budget 12 --max 4K: exit $rc, ${own:-no} s by its clock (${dt} s launch included), header and $rules rules in $tdir/t.tune"
# --buffers shared: the tuner measures on fr_mem_alloc's buffers (shm's
# zero-copy path) and its table says so
timeout -k 15 "$TIMEOUT" "${tlaunch[@]}" -n 2 "$TUNER" --buffers shared --coll allreduce --budget 8 --min 64K \
    --max 256K -o "$tdir/shared.tune" </dev/null >"$tdir/shared.log" 2>&1
rc=$?
ok=0
[ "$rc" = 0 ] && grep -qE '^# measured: .*host buffers of fr_mem_alloc \(shared: zero-copy' "$tdir/shared.tune" &&
    grep -qE '^allreduce +host +1 +2 ' "$tdir/shared.tune" && ok=1
pass_fail $ok "fastreduce-tune --buffers shared: exit $rc, the table's header names the shared buffers (log: $tdir/shared.log)"
# fastreduce-info says where calls go zero-copy, and probes it
INFO=$top_builddir/tools/fastreduce-info
launcher FASTREDUCE_NODE_SIZE
timeout -k 15 "$TIMEOUT" "${LAUNCH[@]}" -n 2 "$INFO" </dev/null >"$tdir/info.log" 2>&1
FASTREDUCE_NODE_SIZE=1 timeout -k 15 "$TIMEOUT" "${LAUNCH[@]}" -n 2 "$INFO" </dev/null >"$tdir/info1.log" 2>&1
ok=0
grep -q '^zero-copy: on buffers of fr_mem_alloc .*allreduce from 4096 bytes' "$tdir/info.log" &&
    grep -q '^zero-copy probe: a 1 MiB allreduce of shared buffers on every rank went zero-copy$' "$tdir/info.log" &&
    grep -q '^zero-copy: not on this job' "$tdir/info1.log" &&
    grep -q '^bcast by cma: private root buffers of 65536 to 524288 bytes' "$tdir/info.log" &&
    grep -q '^bcast by cma: not on rank 0.s node' "$tdir/info1.log" && ok=1
pass_fail $ok "fastreduce-info: zero-copy sizes and probe, and the bcast by cma, on one node; neither with a rank per node (logs: $tdir/info*.log)"
rows=$(grep -cE '^(allreduce|bcast),host,2,1,2,[a-z_]+,[^,]*,[0-9]+,ok,[0-9.]+,' "$tdir/t.csv" 2>/dev/null)
chosen=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "chosen") k = i; next } k && $k == 1' "$tdir/t.csv" 2>/dev/null | wc -l)
# 4..4K: 20 sizes (4 6 8 12 ... 3K 4K) per collective. Every one is in the CSV, measured
# or marked skipped by the budget; the first pass's (powers of 4, and 4K) are always
# measured; each measured one has exactly one chosen row.
read -r seen points coarse < <(awk -F, 'NR > 1 { k[$1 "," $8] = 1 }
    NR > 1 && $9 == "ok" { m[$1 "," $8] = 1; if ($8 == 4 || $8 == 16 || $8 == 64 || $8 == 256 || $8 == 1024 || $8 == 4096) c[$1 "," $8] = 1 }
    END { print length(k), length(m), length(c) }' "$tdir/t.csv" 2>/dev/null)
cut=""; [ "${points:-0}" != 40 ] && cut=" (the budget cut $((40 - ${points:-0})): $(grep -c 'budget ran out' "$tdir/tune.log") warning)"
ok=0; [ "$rows" -gt 40 ] && [ "$seen" = 40 ] && [ "$coarse" = 12 ] && [ "$chosen" = "$points" ] &&
    { [ "$points" = 40 ] || grep -q 'warning: the budget ran out before' "$tdir/tune.log"; } && ok=1
pass_fail $ok "fastreduce-tune CSV: $rows measured rows; $seen of 40 (collective, size) points listed, $points measured$cut, $coarse of 12 first-pass ones, $chosen chosen"
# the second job: every call of the osu benchmark follows a rule of t.tune
# (the table on stdout, the log on stderr: in one file a log line can land inside a row)
FASTREDUCE_TUNE_FILE="$tdir/t.tune" FASTREDUCE_DEBUG=INFO FASTREDUCE_DEBUG_SUBSYS=TUNE,COLL \
    timeout -k 15 "$TIMEOUT" "${tlaunch[@]}" -n 2 "$OSU" -m 4:4096 -i 5 -x 1 </dev/null >"$tdir/use.log" 2>"$tdir/use.err"
rc=$?
loaded=$(grep -c "FASTREDUCE_TUNE_FILE: $tdir/t.tune loaded: .* its fingerprint and shape match" "$tdir/use.err")
used=$(grep -cE 'INFO #[0-9]+ allreduce [0-9]+ bytes .* \(FASTREDUCE_TUNE_FILE rule at line [0-9]+\)' "$tdir/use.err")
other=$(grep -E 'INFO #[0-9]+ allreduce [0-9]+ bytes' "$tdir/use.err" | grep -vc 'FASTREDUCE_TUNE_FILE rule')
# table_choice BYTES [full]: the algorithm t.tune's first allreduce rule for 2 ranks a node
# covering BYTES names (with full, and the parameters it sets)
table_choice() {
    awk -v b="$1" -v full="${2:-}" '
        function bytes(v) { if (v == "inf") return 1e30; if (v ~ /K$/) return substr(v, 1, length(v) - 1) * 1024;
                            if (v ~ /M$/) return substr(v, 1, length(v) - 1) * 1048576; return v + 0 }
        $1 == "allreduce" && $4 == 2 {
            if ($5 == "*") { lo = 0; hi = 1e30 } else { n = split($5, r, "-"); lo = bytes(r[1]); hi = n > 1 ? bytes(r[2]) : lo }
            if (b >= lo && b <= hi) { if (full) { l = $6; for (i = 7; i <= NF && $i !~ /^#/; i++) l = l " " $i; print l }
                                      else print $6; exit } }' "$tdir/t.tune"
}
# the algorithm column of the osu output is the table's choice for that size
mism=0
while read -r size _ _ _ alg; do
    [ "$(table_choice "$size")" = "$alg" ] || mism=$((mism + 1))
done < <(grep -E '^[0-9]+ ' "$tdir/use.log")
ok=0; [ "$rc" = 0 ] && [ "$loaded" = 1 ] && [ "$used" -gt 10 ] && [ "$other" = 0 ] && [ "$mism" = 0 ] && ok=1
pass_fail $ok "a job with FASTREDUCE_TUNE_FILE=t.tune: loaded $loaded time(s), $used calls by its rules, $other by others, $mism sizes not on the table's choice"
# --check right after: runs, reports every sampled size, ends with its summary
timeout -k 15 "$TIMEOUT" "${tlaunch[@]}" -n 2 "$TUNER" --check "$tdir/t.tune" --budget 8 --max 4K \
    </dev/null >"$tdir/check.log" 2>&1
rc=$?
# every sampled size gets a line (measured: ok/STALE; cut by the budget: blank): 4 16 64 256 1K 4K at least
sampled=$(grep -cE '^(ok    |STALE |      )(allreduce|bcast) ' "$tdir/check.log")
ok=0
{ [ "$rc" = 0 ] || [ "$rc" = 3 ]; } && [ "$sampled" -ge 12 ] &&
    grep -qE "^fastreduce-tune: [0-9]+ stale ranges? in $tdir/t.tune" "$tdir/check.log" && ok=1
pass_fail $ok "fastreduce-tune --check: exit $rc, $sampled sampled sizes reported ($(grep -oE '[0-9]+ stale ranges?' "$tdir/check.log"))"
# --check of a table only rank 0 can read (a relative name, rank 1 in another
# folder): the rank that failed says why, and the tool exits 1
tabs=$(cd "$tdir" && pwd) tool=$(cd "$(dirname "$TUNER")" && pwd)/fastreduce-tune
timeout -k 15 "$TIMEOUT" "${tlaunch[@]}" -n 1 -wdir "$tabs" "$tool" --check t.tune --budget 8 --max 64 : \
    -n 1 -wdir / "$tool" --check t.tune --budget 8 --max 64 </dev/null >"$tdir/check_unread.log" 2>&1
rc=$?
ok=0
[ "$rc" = 1 ] && grep -q '^fastreduce-tune: --check t.tune: rank 1: t.tune: cannot read tuning table: No such file or directory$' \
    "$tdir/check_unread.log" && ok=1
pass_fail $ok "fastreduce-tune --check of a table rank 1 cannot read: exit $rc, $(grep -m1 '^fastreduce-tune: --check' "$tdir/check_unread.log")"
# the speed check's tool: fr_osu_allreduce --compare, the table's column beside forced ones;
# a row per size, the table's own choice named in it (with its parameters), table/best a positive ratio; hier
# declines on one node: a line says so at every size and it is never best-forced
FASTREDUCE_TUNE_FILE="$tdir/t.tune" timeout -k 15 "$TIMEOUT" "${tlaunch[@]}" -n 2 "$OSU" -m 4:4096 -i 30 \
    --blocks 3 --compare table,shm,recursive_doubling,hier </dev/null >"$tdir/compare.log" 2>"$tdir/compare.err"
rc=$?
rows=0 mism=0 bad=0
declines=$(grep -cE "^# [0-9]+ bytes: hier declines this call; its column is [a-z_]+'s \(not a best-forced\)$" \
           "$tdir/compare.log")
while read -r size _ _ _ _ best ratio alg; do
    rows=$((rows + 1))
    [ "$(table_choice "$size" full)" = "$alg" ] || mism=$((mism + 1))
    case $best in shm|recursive_doubling) ;; *) bad=$((bad + 1)) ;; esac
    awk -v r="$ratio" 'BEGIN { exit !(r > 0 && r < 100) }' || bad=$((bad + 1))
done < <(grep -E '^[0-9]+ ' "$tdir/compare.log")
ok=0; [ "$rc" = 0 ] && [ "$rows" = 11 ] && [ "$mism" = 0 ] && [ "$bad" = 0 ] && [ "$declines" = 11 ] && ok=1
pass_fail $ok "fr_osu_allreduce --compare table,shm,recursive_doubling,hier with t.tune: exit $rc, $rows rows (want 11), $mism not naming the table's choice, $bad malformed, $declines lines on hier declining (want 11)"

# fr_corepair (two threads, no MPI): the round trip before and after, a row per size and way
# of writing with every figure positive;
# one CPU only: it says so and exits 1; bad arguments exit 2 with the usage line, a CPU
# it may not use 1
CP=$top_builddir/benchmarks/fr_corepair
cpout=$(timeout -k 5 120 "$CP" -r 5 4K 64K 2>&1); rc=$?
if [ "$(nproc)" -ge 2 ]; then
    rows=$(echo "$cpout" | awk '($1 == 4096 || $1 == 65536) && ($2 == "plain" || $2 == "streaming") &&
        $3 > 0 && $4 > 0 && $5 > 0 && $6 > 0 && $7 > 0' | wc -l)
    rts=$(echo "$cpout" | grep -cE "^# (fr_corepair: CPUs [0-9]+ and [0-9]+; a|a) cache line's round trip.*: [0-9]+ ns$")
    ok=0; [ "$rc" = 0 ] && [ "$rows" = 4 ] && [ "$rts" = 2 ] && ok=1
    what="$rows of 4 rows, $rts of 2 round trips"
else
    ok=0; [ "$rc" = 1 ] && echo "$cpout" | grep -q "one CPU only" && ok=1
    what="one CPU: refused"
fi
bad=0
for a in "-c 0,0" "-c 0" "-c ,1" "-c 1," "-r 0" "3x" "0" "-1K" "2G" "17592186045440M"; do
    # shellcheck disable=SC2086
    timeout -k 5 30 "$CP" $a >/dev/null 2>"$LOGDIR/corepair.err"
    [ $? = 2 ] && grep -q '^usage: fr_corepair' "$LOGDIR/corepair.err" || bad=$((bad + 1))
done
# a CPU this process may not run on: refused at once (exit 1), not waited for
timeout -k 5 30 "$CP" -c 0,1000 -r 1 64 >/dev/null 2>"$LOGDIR/corepair.err"
rc1=$?
grep -q '^fr_corepair: CPU 1000 is not one this process may run on$' "$LOGDIR/corepair.err" && [ $rc1 = 1 ] ||
    bad=$((bad + 1))
[ "$bad" = 0 ] || ok=0
pass_fail $ok "fr_corepair -r 5 4K 64K: exit $rc, $what; $bad of 11 bad argument lists not refused (exit 2, or 1 for -c 0,1000)"

# --memory cuda: without a GPU on every rank (or without CUDA and NCCL built in) it
# stops at once with exit 2 and the reason; with them it writes cuda rules.
timeout -k 15 "$TIMEOUT" "${tlaunch[@]}" -n 2 "$TUNER" --memory cuda --budget 8 --max 64K -o "$tdir/c.tune" \
    </dev/null >"$tdir/cuda.log" 2>&1
rc=$?
ok=0
if grep -q "^fastreduce-tune: --memory cuda: " "$tdir/cuda.log"; then
    [ "$rc" = 2 ] && [ ! -e "$tdir/c.tune" ] && ok=1
    what="refused: $(grep -m1 '^fastreduce-tune: --memory cuda: ' "$tdir/cuda.log" | cut -c1-120)"
else
    n=$(grep -cE '^(allreduce|bcast) +cuda +1 +2 +[^ ]+ +nccl' "$tdir/c.tune" 2>/dev/null)
    [ "$rc" = 0 ] && [ "${n:-0}" -ge 2 ] && ok=1
    what="${n:-0} cuda rules naming NCCL algorithms"
fi
pass_fail $ok "fastreduce-tune --memory cuda: exit $rc, $what"

# A named segment a killed job left (its creator's flock gone) is swept by
# the node's next job; one whose creator still holds the lock, and one
# younger than 2 s, are not. (Made by hand: a job killed between creating
# and unlinking its segment cannot be made to order.)
stale=/dev/shm/fastreduce-$$-0-stale live=/dev/shm/fastreduce-$$-0-live young=/dev/shm/fastreduce-$$-0-young
: >"$stale"; : >"$live"
touch -d '1 minute ago' "$stale" "$live"
flock -x "$live" sleep 60 & holder=$!
# (the holder's lock taken before the job starts)
for _ in $(seq 100); do flock -n "$live" true || break; sleep 0.05; done
: >"$young"; t_young=$(date +%s.%N)
run_one 2 "" test_coll --quick --algo shm
# (the young one's age when the launch ended: the job swept before that)
age=$(awk -v t0="$t_young" -v t1="$(date +%s.%N)" 'BEGIN { printf "%.2f", t1 - t0 }')
ok=0; [ ! -e "$stale" ] && [ -e "$live" ] && [ -e "$young" ] && ok=1
pass_fail $ok "a stale named segment swept by the next job ($([ -e "$stale" ] && echo kept || echo removed)), a locked one kept ($([ -e "$live" ] && echo kept || echo removed)), a young one kept ($([ -e "$young" ] && echo kept || echo removed); $age s old at the launch's end)"
kill "$holder" 2>/dev/null; wait "$holder" 2>/dev/null
rm -f "$stale" "$live" "$young"
# Every segment was unlinked as soon as it was mapped: nothing of ours is left.
left=$(ls /dev/shm 2>/dev/null | grep -c '^fastreduce-')
if [ "$left" = 0 ]; then
    echo "PASS: /dev/shm holds no fastreduce segment after the launches"; total_pass=$((total_pass + 1))
else
    echo "FAIL: /dev/shm holds $left fastreduce segment(s): $(ls /dev/shm | grep '^fastreduce-' | head -3)"
    total_fail=$((total_fail + 1)); launch_fail=$((launch_fail + 1))
fi
}

if [ "${FR_TEST_SMOKE:-0}" = 1 ]; then smoke_suite
elif [ "${FR_TEST_ONLY:-}" = nb ]; then nb_suite
elif [ "${FR_TEST_ONLY:-}" = bench ]; then bench_suite
else full_suite; fi

echo "run_mpi.sh: $nlaunch launches, $launch_fail failed, $nskip skipped, $((SECONDS - t_start)) s"
echo "$total_pass passed, $total_fail failed"
if [ "$total_fail" -gt 0 ] || [ "$launch_fail" -gt 0 ]; then
    exit 1
fi
exit 0
