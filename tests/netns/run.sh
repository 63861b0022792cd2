#!/bin/bash
# Several "hosts" on one machine: every host is a Linux network namespace
# (fr-ns0, fr-ns1, ...) with its own host name, joined by veth pairs to a
# bridge in the root namespace, and Open MPI 4.1 launches across them
# through tests/netns/rsh.sh (its plm_rsh_agent: `ip netns exec NS unshare
# --uts`, host name NS). Ranks of different namespaces are then different
# nodes for Open MPI (MPI_Comm_split_type SHARED) and for libfastreduce, with
# no FASTREDUCE_HOSTID or FASTREDUCE_NODE_SIZE, and our UCX point-to-point
# traffic (FASTREDUCE_UCX_TLS=tcp,self, FASTREDUCE_UCX_NET_DEVICES=fr0) and
# MPI's own (oob and btl tcp on 10.77.0.0/24) really cross the veths.
#
# Checks, each counted once:
#   probe ring / probe hier   tests/netns/linkcut --probe: nodes by
#       MPI_Comm_split_type equal the hosts, libfastreduce logs N node(s),
#       and 16 MiB allreduces put at least their size per call on every
#       namespace's veth (the tx_bytes of /sys/class/net/fr0 inside it)
#   test_coll hier / ring     tests/mpi/test_coll --quick --algo hier|ring
#   linkcut ring / hier       a loop of 16 MiB allreduces with
#       FASTREDUCE_TIMEOUT=5; after a few seconds the last namespace's veth
#       is taken down; every rank must get FR_ERR_TIMED_OUT within 15 s of
#       the cut (tests/netns/linkcut.c). Run when fastreduce-info lists
#       FASTREDUCE_TIMEOUT (FR_NETNS_LINKCUT=auto), else reported as SKIP.
# Prints "netns: N passed, M failed" last.
#
# Usage: tests/netns/run.sh            (as root, after scripts/build.sh openmpi)
# Environment (all optional):
#   FR_BUILD_DIR=DIR          the build tree (default build-openmpi beside tests/)
#   FR_NETNS_N=2              namespaces (hosts); FR_NETNS_PPN=2 ranks in each
#   FR_NETNS_LINKCUT=auto|1|0 run the link-cut checks (auto: when the library knows FASTREDUCE_TIMEOUT)
#   FR_NETNS_LINKCUT_ALGOS="ring hier"
#   FR_NETNS_LOGDIR=DIR       per-launch logs (default FR_BUILD_DIR/tests/netns-logs)
#   FR_TEST_TIMEOUT=SECONDS   per launch (default 300)
#   FR_NETNS_KEEP=1           leave the namespaces up at the end (to experiment;
#                             remove them with: ip netns del fr-nsI; ip link del fr-br0)
# Exit status: 0 all passed, 1 a check failed, 77 skipped (not root, no
# network namespaces, no unshare, no Open MPI), 99 setup error (no build,
# names or addresses already in use).
set -u

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
BUILD=${FR_BUILD_DIR:-$top/build-openmpi}
N=${FR_NETNS_N:-2}
PPN=${FR_NETNS_PPN:-2}
NP=$((N * PPN))
NS_PREFIX=fr-ns
VETH_PREFIX=fr-veth
BRIDGE=fr-br0
DEV=fr0                  # the veth's name inside every namespace
SUBNET=10.77.0           # namespace i is SUBNET.(i+1), the bridge SUBNET.254
LINKCUT=${FR_NETNS_LINKCUT:-auto}
LINKCUT_ALGOS=${FR_NETNS_LINKCUT_ALGOS:-ring hier}
LC_TIMEOUT=5             # FASTREDUCE_TIMEOUT of the link-cut runs
LC_CUT_AFTER=3           # seconds of allreduces before the cut
TIMEOUT=${FR_TEST_TIMEOUT:-300}
LOGDIR=${FR_NETNS_LOGDIR:-$BUILD/tests/netns-logs}
RSH=$here/rsh.sh

skip() { echo "netns: SKIP: $*"; exit 77; }
die() { echo "netns: ERROR: $*" >&2; exit 99; }

# ---- can we run here? ---------------------------------------------------------
[ "$(id -u)" = 0 ] || skip "needs root (network namespaces, veths, a bridge)"
command -v ip >/dev/null 2>&1 || skip "no ip command (apt-get install iproute2)"
command -v unshare >/dev/null 2>&1 || skip "no unshare command (util-linux)"
command -v mpirun >/dev/null 2>&1 || skip "no mpirun"
mpirun --version 2>/dev/null | grep -q "Open MPI" || skip "mpirun is not Open MPI's (the launch uses its plm_rsh_agent)"
case $N in [2-9]) ;; *) die "FR_NETNS_N=$N: 2 to 9 namespaces" ;; esac
case $PPN in [1-9]) ;; *) die "FR_NETNS_PPN=$PPN: 1 to 9 ranks per namespace" ;; esac

for i in $(seq 0 $((N - 1))); do
    [ -e "/run/netns/$NS_PREFIX$i" ] && die "network namespace $NS_PREFIX$i exists (another run, or one left over: ip netns del $NS_PREFIX$i)"
    ip link show "$VETH_PREFIX$i" >/dev/null 2>&1 && die "interface $VETH_PREFIX$i exists (ip link del $VETH_PREFIX$i)"
done
ip link show "$BRIDGE" >/dev/null 2>&1 && die "interface $BRIDGE exists (another run, or one left over: ip link del $BRIDGE)"
ip -4 addr show 2>/dev/null | grep -q "inet $SUBNET\." && die "an interface already has an address in $SUBNET.0/24"

if ! ip netns add "${NS_PREFIX}probe$$" 2>/dev/null; then
    skip "ip netns add failed (no network namespaces here)"
fi
if ! ip netns exec "${NS_PREFIX}probe$$" unshare --uts true 2>/dev/null; then
    ip netns del "${NS_PREFIX}probe$$"
    skip "unshare --uts failed inside a network namespace"
fi
ip netns del "${NS_PREFIX}probe$$"

TEST_COLL=$BUILD/tests/mpi/test_coll
LINKCUT_BIN=$BUILD/tests/netns/linkcut
INFO=$BUILD/tools/fastreduce-info
[ -f "$BUILD/tests/Makefile" ] || die "no build in $BUILD (scripts/build.sh openmpi, or set FR_BUILD_DIR)"
make -C "$BUILD/tests" mpi/test_coll netns/linkcut >/dev/null 2>&1 ||
    die "could not build test_coll and linkcut (make -C $BUILD/tests mpi/test_coll netns/linkcut)"
mkdir -p "$LOGDIR"

# ---- the namespaces, and their removal on any exit ----------------------------
made_ns=()
made_links=()
mpid=""
# kill_ns_procs: end whatever still runs in our namespaces (orteds, ranks:
# everything there was started by this script)
kill_ns_procs() {
    local ns pids
    for ns in "${made_ns[@]}"; do
        pids=$(ip netns pids "$ns" 2>/dev/null)
        # shellcheck disable=SC2086
        [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
    done
}
# stop_bg: end the link-cut launch in the background (timeout and its mpirun),
# its daemons first: an mpirun asked to stop waits for daemons it cannot reach
stop_bg() {
    [ -n "${mpid:-}" ] || return 0
    kill_ns_procs
    kill "$mpid" 2>/dev/null
    for _ in $(seq 25); do kill -0 "$mpid" 2>/dev/null || break; sleep 0.2; done
    if kill -0 "$mpid" 2>/dev/null; then
        pkill -KILL -P "$mpid" 2>/dev/null   # the mpirun under our timeout
        kill -KILL "$mpid" 2>/dev/null
    fi
    wait "$mpid" 2>/dev/null
    mpid=""
}
cleanup() {
    trap - EXIT INT TERM HUP
    [ "${FR_NETNS_KEEP:-0}" = 1 ] && { echo "netns: FR_NETNS_KEEP=1: leaving ${made_ns[*]:-} and ${made_links[*]:-} up"; return; }
    local ns l
    stop_bg
    kill_ns_procs
    # the veths first: deleting one end removes both at once, where a namespace's
    # deletion removes its end only later, in the background
    for l in "${made_links[@]}"; do ip link del "$l" 2>/dev/null; done
    for ns in "${made_ns[@]}"; do
        ip netns del "$ns" 2>/dev/null
        # what killed ranks and orteds leave, named after their host (= the namespace):
        # the session directory and vader's segments
        rm -rf "${TMPDIR:-/tmp}/ompi.$ns.$(id -u)"
        rm -f /dev/shm/vader_segment."$ns".*
    done
    [ -n "${lcdir:-}" ] && rm -rf "$lcdir"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

setup() {
    ip link add "$BRIDGE" type bridge || return 1
    made_links+=("$BRIDGE")
    ip addr add "$SUBNET.254/24" dev "$BRIDGE" || return 1
    ip link set "$BRIDGE" up || return 1
    local i ns
    for i in $(seq 0 $((N - 1))); do
        ns=$NS_PREFIX$i
        ip netns add "$ns" || return 1
        made_ns+=("$ns")
        ip link add "$VETH_PREFIX$i" type veth peer name "${VETH_PREFIX}p$i" || return 1
        made_links+=("$VETH_PREFIX$i")
        ip link set "$VETH_PREFIX$i" master "$BRIDGE" || return 1
        ip link set "$VETH_PREFIX$i" up || return 1
        ip link set "${VETH_PREFIX}p$i" netns "$ns" || return 1
        ip -n "$ns" link set "${VETH_PREFIX}p$i" name "$DEV" || return 1
        ip -n "$ns" addr add "$SUBNET.$((i + 1))/24" dev "$DEV" || return 1
        ip -n "$ns" link set "$DEV" up || return 1
        ip -n "$ns" link set lo up || return 1
    done
}
setup || die "could not set up the namespaces"
hosts=""
for i in $(seq 0 $((N - 1))); do hosts+="${hosts:+,}$NS_PREFIX$i:$PPN"; done

# ---- the launch ---------------------------------------------------------------
# shellcheck source=scripts/env.sh
. "$top/scripts/env.sh"
unset FASTREDUCE_ALGO FASTREDUCE_TUNE FASTREDUCE_TUNE_FILE FASTREDUCE_NODE_SIZE FASTREDUCE_HOSTID FASTREDUCE_BIND \
      FASTREDUCE_REPORT_BINDINGS FASTREDUCE_TOPO_XML FASTREDUCE_TIMEOUT FASTREDUCE_DEBUG FASTREDUCE_DEBUG_SUBSYS \
      FASTREDUCE_DEBUG_FILE FASTREDUCE_TEST_QUICK UCX_TLS UCX_NET_DEVICES
# shellcheck disable=SC2054  # the commas are inside mpirun's arguments
MPIRUN=(mpirun --host "$hosts" -np "$NP" --bind-to none
        --mca plm_rsh_agent "$RSH" --mca plm_rsh_no_tree_spawn 1
        --mca oob_tcp_if_include "$SUBNET.0/24" --mca btl_tcp_if_include "$SUBNET.0/24"
        --mca pml ob1 --mca btl self,vader,tcp
        -x FASTREDUCE_UCX_TLS=tcp,self -x FASTREDUCE_UCX_NET_DEVICES="$DEV"
        -x FASTREDUCE_TUNE_PATH= -x FR_NETNS_DEV="$DEV")

npass=0
nfail=0
nlaunch=0
pass() { npass=$((npass + 1)); echo "PASS: $*"; }
fail() { nfail=$((nfail + 1)); echo "FAIL: $*"; }

# launch TAG [-x VAR=value ...] -- PROGRAM ARGS...: runs it, output in $log, status in $rc
launch() {
    local tag=$1; shift
    local xs=()
    while [ "$1" != -- ]; do xs+=("$1"); shift; done
    shift
    nlaunch=$((nlaunch + 1))
    log=$LOGDIR/$(printf '%02d' "$nlaunch")-$tag.log
    echo "${MPIRUN[*]} ${xs[*]} $*" >"$log"
    local t0=$SECONDS
    timeout -k 10 "$TIMEOUT" "${MPIRUN[@]}" "${xs[@]}" "$@" </dev/null >>"$log" 2>&1
    rc=$?
    dt=$((SECONDS - t0))
}

show_tail() { tail -n "${2:-15}" "$1" | sed 's/^/    /'; }

echo "netns: $N namespaces x $PPN ranks ($hosts), bridge $BRIDGE $SUBNET.254/24, logs in $LOGDIR"
echo "netns: ${MPIRUN[*]}"
t_start=$SECONDS

# ---- nodes and the veths ------------------------------------------------------
for a in ring hier; do
    launch "probe-$a" -x FASTREDUCE_DEBUG=INFO -x FASTREDUCE_DEBUG_SUBSYS=INIT -- "$LINKCUT_BIN" --probe --algo "$a"
    what="probe $a: $N nodes by MPI_Comm_split_type and by host, UCX traffic on the veths"
    nodes_ok=$(grep -c "^probe: nodes=$N hosts=$N OK" "$log")
    lib_ok=$(grep -c "fastreduce INFO communicator of $NP ranks on $N node(s)" "$log")
    veth_ok=$(grep -c "^probe: veth traffic OK" "$log")
    if [ "$rc" = 0 ] && [ "$nodes_ok" -ge 1 ] && [ "$lib_ok" -ge 1 ] && [ "$veth_ok" -ge 1 ]; then
        pass "$what ($dt s): $(grep '^probe: veth' "$log" | sed 's/^probe: //')"
    else
        fail "$what ($dt s): exit $rc, nodes line $nodes_ok, library's node count line $lib_ok, veth line $veth_ok  log: $log"
        grep -E '^probe' "$log" | sed 's/^/    /'
        show_tail "$log"
    fi
done

# ---- test_coll ----------------------------------------------------------------
for a in hier ring; do
    launch "test_coll-$a" -- "$TEST_COLL" --quick --algo "$a"
    what="test_coll --quick --algo $a at $N x $PPN"
    line=$(grep -E '^test_coll np=[0-9]+: [0-9]+ passed, [0-9]+ failed$' "$log" | tail -n 1)
    if [ "$rc" = 0 ] && [ -n "$line" ] && echo "$line" | grep -q ' 0 failed$' &&
       grep -q "^test_coll np=$NP: nodes=$N " "$log"; then
        pass "$what ($dt s): $line"
    else
        note=""
        [ "$rc" = 124 ] || [ "$rc" = 137 ] && note=" [TIMEOUT after $TIMEOUT s]"
        grep -q "^test_coll np=$NP: nodes=$N " "$log" || note+=" [test_coll did not see $N nodes]"
        fail "$what ($dt s): exit $rc, ${line:-no summary}$note  log: $log"
        if grep -qE '^(FAIL|TIMEOUT)' "$log"; then grep -E '^(FAIL|TIMEOUT)' "$log" | head -n 20 | sed 's/^/    /'
        else show_tail "$log"; fi
    fi
done

# ---- link cut -----------------------------------------------------------------
run_linkcut=0
case $LINKCUT in
    1|yes) run_linkcut=1 ;;
    0|no) echo "SKIP: linkcut (FR_NETNS_LINKCUT=$LINKCUT)" ;;
    *)  if "$INFO" 2>/dev/null | grep -q FASTREDUCE_TIMEOUT; then run_linkcut=1
        else echo "SKIP: linkcut: fastreduce-info lists no FASTREDUCE_TIMEOUT in this build (FR_NETNS_LINKCUT=1 runs it anyway)"; fi ;;
esac
lcdir=""
if [ "$run_linkcut" = 1 ]; then
    lcdir=$(mktemp -d /tmp/fr-netns-linkcut.XXXXXX)
    cut_ns=$NS_PREFIX$((N - 1))
    for a in $LINKCUT_ALGOS; do
        rm -f "$lcdir"/*
        nlaunch=$((nlaunch + 1))
        log=$LOGDIR/$(printf '%02d' "$nlaunch")-linkcut-$a.log
        xs=(-x "FASTREDUCE_TIMEOUT=$LC_TIMEOUT" -x FR_LINKCUT_DIR="$lcdir" -x FR_LINKCUT_STAMP="$lcdir/cut")
        echo "${MPIRUN[*]} ${xs[*]} $LINKCUT_BIN --algo $a --seconds 120" >"$log"
        t0=$SECONDS
        timeout -k 10 180 "${MPIRUN[@]}" "${xs[@]}" "$LINKCUT_BIN" --algo "$a" --seconds 120 </dev/null >>"$log" 2>&1 &
        mpid=$!
        what="linkcut $a: $DEV down in $cut_ns, FASTREDUCE_TIMEOUT=$LC_TIMEOUT"
        for _ in $(seq 300); do
            [ -e "$lcdir/running" ] && break
            kill -0 "$mpid" 2>/dev/null || break
            sleep 0.2
        done
        if [ ! -e "$lcdir/running" ]; then
            stop_bg
            fail "$what: the allreduce loop never started  log: $log"
            show_tail "$log"
            continue
        fi
        sleep "$LC_CUT_AFTER"
        ip -n "$cut_ns" link set "$DEV" down
        date +%s.%N >"$lcdir/cut.tmp" && mv "$lcdir/cut.tmp" "$lcdir/cut"
        echo "netns: $(date +%T) $DEV down in $cut_ns" >>"$log"
        # every rank files its verdict by cut + timeout + 10 s (its watchdog's deadline)
        for _ in $(seq $(((LC_TIMEOUT + 15) * 5))); do
            nfiles=0
            for f in "$lcdir"/rank*.txt; do [ -e "$f" ] && nfiles=$((nfiles + 1)); done
            [ "$nfiles" -ge "$NP" ] && break
            sleep 0.2
        done
        ip -n "$cut_ns" link set "$DEV" up   # so that Open MPI can wind the job down
        # the ranks linger until cut + timeout + 12 s; give mpirun a little more
        for _ in $(seq 150); do kill -0 "$mpid" 2>/dev/null || break; sleep 0.2; done
        stop_bg   # also leaves no process of this job behind for the next run
        dt=$((SECONDS - t0))
        cat "$lcdir"/rank*.txt >>"$log" 2>/dev/null
        nv=$(cat "$lcdir"/rank*.txt 2>/dev/null | grep -c '^linkcut rank [0-9]* host .*: \(PASS\|FAIL\)')
        np_pass=$(cat "$lcdir"/rank*.txt 2>/dev/null | grep -c '^linkcut rank [0-9]* host .*: PASS')
        if [ "$np_pass" = "$NP" ]; then
            pass "$what ($dt s): all $NP ranks got FR_ERR_TIMED_OUT in time"
            grep -h 'detail:' "$lcdir"/rank*.txt | head -n 2 | sed 's/^/    /'
        else
            fail "$what ($dt s): $np_pass of $NP ranks passed, $((NP - nv)) gave no verdict  log: $log"
            cat "$lcdir"/rank*.txt 2>/dev/null | sed 's/^/    /'
        fi
    done
fi

echo "netns: $((SECONDS - t_start)) s"
echo "netns: $npass passed, $nfail failed"
[ "$nfail" = 0 ]
