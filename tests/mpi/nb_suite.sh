# Sourced by run_mpi.sh (its launcher, pass_fail, LOGDIR, BIN, FLAVOR,
# TIMEOUT and top_builddir): nb_suite, the interposer's MPI_Iallreduce and
# MPI_Ibcast under an unmodified program (mpi/mpi_nb_program.c: requests
# completed with MPI_Wait, MPI_Test, MPI_Waitall and MPI_Testall among
# point-to-point ones and blocking calls), at MPI_THREAD_SINGLE and
# MPI_THREAD_MULTIPLE, run plain and with LD_PRELOAD: every result right,
# and FASTREDUCE_STATS says what was served and what passed, and why. Open
# MPI has no generalized-request poll, so only MULTIPLE serves them (the
# progress thread completes the requests); MPICH's poll serves them at both
# levels, but below MULTIPLE passes those whose run calls MPI
# (FASTREDUCE_CHECK=1 here). FASTREDUCE_PROGRESS=caller and
# FASTREDUCE_DISABLE=1 pass them all, and so does UCX that a blocking call
# found cannot be set up (under ring); ranks that differ in thread level
# or FASTREDUCE_PROGRESS, or where one cannot make a thread, agree on it. A
# user op is always passed. A communicator freed while another thread tests
# its request goes through on every rank (--free-tested).
# shellcheck shell=bash

# nb_launch TAG NP COMMAND...: NP ranks of COMMAND (NP 0: COMMAND is the
# launcher's whole list of applications); $NB_DIR/TAG.out and .err, rc
nb_launch() {
    local tag=$1 n=$2
    shift 2
    launcher FASTREDUCE_TUNE_PATH
    local apps=(-n "$n" "$@")
    [ "$n" = 0 ] && apps=("$@")
    timeout -k 15 "$TIMEOUT" "${LAUNCH[@]}" "${apps[@]}" </dev/null >"$NB_DIR/$tag.out" 2>"$NB_DIR/$tag.err"
    rc=$?
}

# nb_rows TAG BY WHAT RANKS: how many rows of TAG's summary are iallreduce
# or ibcast calls by BY (fr or MPI) whose algorithm or reason starts WHAT,
# on communicators of RANKS ranks (the column 8 from the end)
nb_rows() {
    grep -E "fastreduce STATS i(allreduce|bcast) +$2 +$3" "$NB_DIR/$1.err" | awk -v n="$4" '$(NF - 7) == n' | wc -l
}

# nb_result TAG NP LEVEL: the summary line's passed count, 0 when any failed or none
nb_result() {
    sed -nE "s/^mpi_nb_program $3 np=$2: ([0-9]+) passed, 0 failed$/\\1/p" "$NB_DIR/$1.out" | grep . || echo 0
}

# Plain and under LD_PRELOAD, at 2 and 3 ranks and both levels.
nb_levels() {
    local np lv ok args want nfr nby nop via=thread
    [ "$FLAVOR" = mpich ] && via=poll
    for np in 2 3; do
        for lv in single multiple; do
            # (Open MPI 4.1's own MPI_Iallreduce crashes when its communicator is freed first)
            args=(); [ "$FLAVOR" = mpich ] && args=(--free-pending)
            nb_launch plain-$lv-$np $np "$NB_PROG" $lv "${args[@]}"
            ok=0; [ "$rc" = 0 ] && [ "$(nb_result plain-$lv-$np $np $lv)" -gt 1000 ] && ok=1
            pass_fail $ok "mpi_nb_program np=$np $lv, plain: $(tail -n 1 "$NB_DIR/plain-$lv-$np.out") (exit $rc)"
            want=served; [ "$FLAVOR" = openmpi ] && [ $lv = single ] && want=passed
            [ $want = served ] && args=(--free-pending)
            nb_launch pre-$lv-$np $np "${NB_PRE[@]}" FASTREDUCE_STATS=1 "$NB_PROG" $lv "${args[@]}"
            nfr=$(nb_rows pre-$lv-$np fr "[a-z_]+ via grequest\\+$via " $np)
            nby=$(nb_rows pre-$lv-$np MPI "below MPI_THREAD_MULTIPLE, no grequest poll " $np)
            nop=$(grep -cE 'fastreduce STATS iallreduce +MPI +op ' "$NB_DIR/pre-$lv-$np.err")
            ok=0
            if [ "$rc" = 0 ] && [ "$(nb_result pre-$lv-$np $np $lv)" -gt 1000 ] && [ "$nop" -ge 1 ]; then
                if [ $want = served ]; then [ "$nfr" = 2 ] && [ "$nby" = 0 ] && ok=1
                else [ "$nfr" = 0 ] && [ "$nby" = 2 ] && ok=1; fi
            fi
            pass_fail $ok "mpi_nb_program np=$np $lv, LD_PRELOAD: $(tail -n 1 "$NB_DIR/pre-$lv-$np.out"); want $want: $nfr rows served via grequest+$via, $nby passed below MULTIPLE, $nop user-op rows passed (exit $rc)"
        done
    done
}

# What the settings and the ranks' differences make of them.
nb_settings() {
    local ok nfr nby
    # below MULTIPLE with a run that calls MPI (FASTREDUCE_CHECK=1): MPICH passes it, with its reason
    nb_launch check 2 "${NB_PRE[@]}" FASTREDUCE_STATS=1 FASTREDUCE_CHECK=1 "$NB_PROG" single
    nfr=$(nb_rows check fr "" 2)
    if [ "$FLAVOR" = mpich ]; then nby=$(nb_rows check MPI "needs MPI below MPI_THREAD_MULTIPLE " 2)
    else nby=$(nb_rows check MPI "below MPI_THREAD_MULTIPLE, no grequest poll " 2); fi
    ok=0; [ "$rc" = 0 ] && [ "$(nb_result check 2 single)" -gt 1000 ] && [ "$nfr" = 0 ] && [ "$nby" = 2 ] && ok=1
    pass_fail $ok "mpi_nb_program np=2 single, FASTREDUCE_CHECK=1: $nfr rows served, $nby passed with the reason (exit $rc)"
    # FASTREDUCE_PROGRESS=caller on one rank only, and MPI_THREAD_MULTIPLE on
    # one rank only: agreed, so that the ranks serve or pass each call alike
    # (a communicator of rank 0 alone goes by rank 0's)
    nb_launch caller 0 -n 1 "${NB_PRE[@]}" FASTREDUCE_STATS=1 "$NB_PROG" multiple : \
        -n 1 "${NB_PRE[@]}" FASTREDUCE_PROGRESS=caller "$NB_PROG" multiple
    nfr=$(nb_rows caller fr "" 2)
    nby=$(nb_rows caller MPI "FASTREDUCE_PROGRESS=caller " 2)
    ok=0; [ "$rc" = 0 ] && [ "$(nb_result caller 2 multiple)" -gt 1000 ] && [ "$nfr" = 0 ] && [ "$nby" = 2 ] && ok=1
    pass_fail $ok "mpi_nb_program np=2 multiple, FASTREDUCE_PROGRESS=caller on rank 1 only: $nfr rows served, $nby passed as caller (exit $rc)"
    nb_launch levels 0 -n 1 "${NB_PRE[@]}" FASTREDUCE_STATS=1 "$NB_PROG" multiple : -n 1 "${NB_PRE[@]}" "$NB_PROG" single
    nfr=$(nb_rows levels fr "" 2)
    nby=$(nb_rows levels MPI "below MPI_THREAD_MULTIPLE, no grequest poll " 2)
    ok=0
    if [ "$rc" = 0 ] && [ "$(nb_result levels 2 multiple)" -gt 1000 ]; then
        # (MPICH serves them below MULTIPLE too)
        if [ "$FLAVOR" = mpich ]; then [ "$nfr" = 2 ] && ok=1; else [ "$nfr" = 0 ] && [ "$nby" = 2 ] && ok=1; fi
    fi
    pass_fail $ok "mpi_nb_program np=2, MPI_THREAD_MULTIPLE on rank 0 only: $nfr rows served, $nby passed below MULTIPLE (exit $rc)"
    # a rank that cannot make the progress thread: agreed when the
    # communicator is cached, so every rank passes them (none waits for a
    # request the other refused or runs only inside MPI_Test)
    nb_launch nothread 0 -n 1 "${NB_PRE[@]}" FASTREDUCE_STATS=1 "$NB_PROG" multiple : \
        -n 1 "${NB_PRE[@]}" FR_TEST_NO_THREADS=1 "$NB_PROG" multiple
    nfr=$(nb_rows nothread fr "" 2)
    nby=$(nb_rows nothread MPI "no progress thread on some rank " 2)
    ok=0; [ "$rc" = 0 ] && [ "$(nb_result nothread 2 multiple)" -gt 1000 ] && [ "$nfr" = 0 ] && [ "$nby" = 2 ] &&
        grep -q 'no progress thread (pthread_create' "$NB_DIR/nothread.err" && ok=1
    pass_fail $ok "mpi_nb_program np=2 multiple, no thread can be made on rank 1: $nfr rows served, $nby passed for it (exit $rc)"
    nb_launch off 2 "${NB_PRE[@]}" FASTREDUCE_STATS=1 FASTREDUCE_DISABLE=1 "$NB_PROG" multiple
    nfr=$(grep -cE 'fastreduce STATS [a-z]+ +fr ' "$NB_DIR/off.err")
    nby=$(nb_rows off MPI "FASTREDUCE_DISABLE=1 " 2)
    ok=0; [ "$rc" = 0 ] && [ "$(nb_result off 2 multiple)" -gt 1000 ] && [ "$nfr" = 0 ] && [ "$nby" = 2 ] && ok=1
    pass_fail $ok "mpi_nb_program np=2 multiple, FASTREDUCE_DISABLE=1: $nfr rows served, $nby non-blocking rows passed as disabled (exit $rc)"
    # UCX that cannot be set up, under ring (which needs it): once a blocking
    # MPI_Allreduce found that, MPI_Iallreduce goes to MPI too, rather than
    # fail in its request; MPI_Ibcast, on shm, is still served
    nb_launch noucx 2 "${NB_PRE[@]}" FASTREDUCE_STATS=1 FASTREDUCE_UCX_TLS=no_such_transport FASTREDUCE_ALGO=ring \
        "$NB_PROG" multiple
    nfr=$(grep -E 'fastreduce STATS iallreduce +fr ' "$NB_DIR/noucx.err" | awk '$(NF - 7) == 2' | wc -l)
    nby=$(nb_rows noucx MPI "fastreduce has no UCX here " 2)
    ok=0; [ "$rc" = 0 ] && [ "$(nb_result noucx 2 multiple)" -gt 1000 ] && [ "$nfr" = 0 ] && [ "$nby" = 1 ] && ok=1
    pass_fail $ok "mpi_nb_program np=2 multiple, no UCX, ring forced: $nfr iallreduce rows served, $nby passed for it (exit $rc)"
}

# Calls that fail: at their start, and while they run.
nb_errors() {
    local ok lv
    # a call in error: at once, through the communicator's error handler (served or passed)
    for lv in single multiple; do
        nb_launch err-$lv 2 "${NB_PRE[@]}" "$NB_PROG" $lv --errors
        ok=0; grep -qE "^errors: .* returned class ([0-9]+) \(MPI_ERR_BUFFER is \1\); the error handler saw class \1$" \
            "$NB_DIR/err-$lv.out" && ok=1
        pass_fail $ok "mpi_nb_program np=2 $lv --errors: $(cat "$NB_DIR/err-$lv.out")"
    done
    # a served request that fails while it runs (rank 1 never starts its own;
    # timed out): MPI_Wait returns its class, through MPI_COMM_WORLD's handler
    nb_launch fail 2 "${NB_PRE[@]}" FASTREDUCE_TIMEOUT=1 "$NB_PROG" multiple --fail
    ok=0; [ "$rc" = 0 ] && grep -qE "^fail: MPI_Iallreduce started with 0; MPI_Wait returned class ([0-9]+) \(MPI_ERR_OTHER is \1\), the request freed$" \
        "$NB_DIR/fail.out" && grep -q 'fastreduce WARN MPI_Iallreduce failed: .* timed out' "$NB_DIR/fail.err" && ok=1
    pass_fail $ok "mpi_nb_program np=2 multiple --fail under FASTREDUCE_TIMEOUT=1: $(grep '^fail:' "$NB_DIR/fail.out") (exit $rc)"
    # a communicator freed while another thread tests its request, 40 times
    nb_launch freetested 3 "${NB_PRE[@]}" "$NB_PROG" multiple --free-tested
    ok=0; [ "$rc" = 0 ] && [ "$(nb_result freetested 3 multiple)" -gt 1000 ] && grep -q '^free-tested: 40 ' "$NB_DIR/freetested.out" && ok=1
    pass_fail $ok "mpi_nb_program np=3 multiple --free-tested, LD_PRELOAD: $(tail -n 1 "$NB_DIR/freetested.out") (exit $rc)"
}

nb_suite() {
    NB_DIR="$LOGDIR/interpose-nb"
    NB_PRE=(env LD_PRELOAD="$(cd "$top_builddir/lib/.libs" 2>/dev/null && pwd)/libfastreduce-mpi.so")
    NB_PROG=$BIN/mpi_nb_program
    rm -rf "$NB_DIR"; mkdir -p "$NB_DIR"
    nb_levels
    nb_settings
    nb_errors
}
