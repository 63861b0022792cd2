#!/usr/bin/env bash
# Valgrind memcheck over communicators made and destroyed in a loop: the
# normal Open MPI build (scripts/build.sh, build-openmpi/), then
# tests/mpi/comm_loop (every host algorithm forced, on one node and on two
# faked ones, checked calls, fr_comm_destroy; K times) at 2 ranks under
#   mpirun -np 2 valgrind --tool=memcheck --leak-check=full
#          --errors-for-leak-kinds=definite --error-exitcode=3
#          --suppressions=tests/valgrind/fastreduce.supp
# Any memcheck error (invalid access, uninitialised value, definite leak)
# not suppressed there (MPI/PMIx internals only) fails the launch.
#
# Usage: scripts/valgrind.sh [extra configure arguments for build.sh]
# Environment:
#   FR_VG_LOOPS=K        comm_loop's loops in the main launch (default 3)
#   FR_VG_TIMEOUT=SECONDS per launch (default 300)
# Logs (one valgrind log per rank) in build-openmpi/valgrind-logs/.
# Ends with "valgrind: N passed, M failed" (one per launch).
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
bdir=$top/build-openmpi
LOOPS=${FR_VG_LOOPS:-3}
TIMEOUT=${FR_VG_TIMEOUT:-300}
SUPP=$top/tests/valgrind/fastreduce.supp
t_start=$SECONDS

command -v valgrind >/dev/null 2>&1 || { echo "valgrind.sh: valgrind not found (apt-get install -y valgrind)" >&2; exit 99; }
"$top/scripts/build.sh" openmpi "$@" || { echo "valgrind.sh: build failed"; exit 1; }
make -C "$bdir/tests" mpi/comm_loop >"$bdir/valgrind-make.out" 2>&1 || {
    tail -20 "$bdir/valgrind-make.out"; echo "valgrind.sh: building tests/mpi/comm_loop failed"; exit 1; }
# the program itself, not libtool's wrapper script, with the build's library
PROG=$bdir/tests/mpi/.libs/comm_loop
[ -x "$PROG" ] || PROG=$bdir/tests/mpi/comm_loop
LIBDIR=$bdir/lib/.libs
echo "valgrind.sh: built in $((SECONDS - t_start)) s; $(valgrind --version)"

. "$top/scripts/env.sh"
unset FASTREDUCE_ALGO FASTREDUCE_TUNE FASTREDUCE_TUNE_FILE FASTREDUCE_NODE_SIZE FASTREDUCE_BIND \
      FASTREDUCE_REPORT_BINDINGS FASTREDUCE_TOPO_XML FASTREDUCE_UCX_TLS
export FASTREDUCE_TUNE_PATH=
# hwloc's x86 (CPUID) backend cannot run under valgrind and says so on every
# topology load; its Linux backend finds the same machine.
export HWLOC_COMPONENTS=-x86
LOGROOT=$bdir/valgrind-logs
rm -rf "$LOGROOT"; mkdir -p "$LOGROOT"
VG=(valgrind --tool=memcheck --leak-check=full --errors-for-leak-kinds=definite --error-exitcode=3
    --suppressions="$SUPP" --num-callers=40 --keep-debuginfo=yes --gen-suppressions=all)

npass=0; nfail=0; nlaunch=0
# vg_run NAME "VAR=value ..." ARGS...: comm_loop ARGS at 2 ranks under memcheck
vg_run() {
    local name=$1 envs=$2; shift 2
    nlaunch=$((nlaunch + 1))
    local dir e
    dir=$LOGROOT/$(printf '%02d' "$nlaunch")-$name
    mkdir -p "$dir"
    local xs=(-x HWLOC_COMPONENTS -x FASTREDUCE_TUNE_PATH -x "LD_LIBRARY_PATH=$LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
    for e in $envs; do xs+=(-x "${e%%=*}"); done
    local t0=$SECONDS rc
    # shellcheck disable=SC2086
    env $envs timeout -k 15 "$TIMEOUT" mpirun --oversubscribe --mca btl self,vader --bind-to none "${xs[@]}" -n 2 \
        "${VG[@]}" --log-file="$dir/vg.%p" "$PROG" "$@" </dev/null >"$dir/out.log" 2>&1
    rc=$?
    local dt=$((SECONDS - t0)) ok=1 note="" line nlogs nclean errs
    line=$(grep -E '^comm_loop np=2: [0-9]+ passed, [0-9]+ failed$' "$dir/out.log" | tail -n 1)
    nlogs=$(find "$dir" -name 'vg.*' | wc -l)
    nclean=$(grep -l 'ERROR SUMMARY: 0 errors from 0 contexts' "$dir"/vg.* 2>/dev/null | wc -l)
    errs=$(sed -nE 's/.*ERROR SUMMARY: ([0-9]+) errors.*/\1/p' "$dir"/vg.* 2>/dev/null | awk '{s += $1} END {print s + 0}')
    echo "$line" | grep -qE ' 0 failed$' || { ok=0; note+=" ${line:+test failures;}${line:-no summary line;}"; }
    [ "$rc" = 0 ] || { ok=0; note+=" exit status $rc;"; }
    { [ "$rc" = 124 ] || [ "$rc" = 137 ]; } && note+=" TIMEOUT after $TIMEOUT s;"
    [ "$nlogs" = 2 ] && [ "$nclean" = 2 ] || { ok=0; note+=" $errs memcheck error(s) in $nlogs rank log(s), $nclean clean;"; }
    local what="np=2 ${envs:+$envs }comm_loop $*"
    if [ "$ok" = 1 ]; then
        npass=$((npass + 1))
        echo "PASS: $what (${dt} s): $line; memcheck: 0 errors on both ranks ($(grep -h 'definitely lost:' "$dir"/vg.* | sed -E 's/.*definitely lost: //' | paste -sd/ -))"
    else
        nfail=$((nfail + 1))
        echo "FAIL: $what (${dt} s): ${line:-no result} [${note# }]  logs: ${dir#"$top"/}"
        grep -hE '^FAIL' "$dir/out.log" | head -n 10 | sed 's/^/    /'
        local f
        for f in "$dir"/vg.*; do
            [ -e "$f" ] || continue
            grep -q 'ERROR SUMMARY: 0 errors' "$f" && continue
            echo "    --- ${f#"$top"/}"
            # each error's first lines (its suppression block is in the log)
            awk '/^==[0-9]+== [A-Z0-9].*(Invalid|uninitialised|Uninitialised|definitely lost|Conditional|Mismatched|overlap|Syscall)/ { n = 12 }
                 /^\{$/ { n = 0 } n > 0 { print; n-- }' "$f" | head -n 60 | sed 's/^/    /'
        done
        [ "$nlogs" = 0 ] && tail -n 15 "$dir/out.log" | sed 's/^/    /'
    fi
}

# UCX on its default transports (shared memory between the two ranks)
vg_run loop "" "$LOOPS"
# our UCX traffic on TCP sockets: hier across the faked nodes takes the network path
vg_run loop-tcp "FASTREDUCE_UCX_TLS=tcp,self" 1

echo "valgrind: $nlaunch launches in $((SECONDS - t_start)) s, logs in ${LOGROOT#"$top"/}"
echo "valgrind: $npass passed, $nfail failed"
[ "$nfail" = 0 ]
