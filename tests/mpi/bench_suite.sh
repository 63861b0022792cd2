# Sourced by run_mpi.sh (its launcher, pass_fail, LOGDIR, FLAVOR, TIMEOUT
# and top_builddir): bench_suite, short runs of the benchmarks' scripts and
# programs (benchmarks/) and of the example trainer that check what they
# refuse and what they say about their own method, not their figures.
# shellcheck shell=bash

BENCH_DIR="$LOGDIR/bench"
BENCH_SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck disable=SC2154   # (top_builddir: run_mpi.sh's)
BENCH_BIN=$(cd "$top_builddir/benchmarks" 2>/dev/null && pwd)

# bench_launch TAG NP PROGRAM ARGS...: NP ranks of PROGRAM, with the
# settings VAR=value of the array BENCH_ENV; $BENCH_DIR/TAG.out and .err, rc
BENCH_ENV=()
bench_launch() {
    local tag=$1 n=$2 e names=(FASTREDUCE_TUNE_PATH)
    shift 2
    for e in "${BENCH_ENV[@]}"; do names+=("${e%%=*}"); done
    launcher "${names[@]}"
    env "${BENCH_ENV[@]}" timeout -k 15 "$TIMEOUT" "${LAUNCH[@]}" -n "$n" "$@" </dev/null >"$BENCH_DIR/$tag.out" \
        2>"$BENCH_DIR/$tag.err"
    rc=$?
}

# perf_tables.sh np in a copy of the scripts whose build-openmpi runs this
# build's programs at two tiny sizes, and with no build-mpich, the usual
# case: every round runs and the tables are printed. Open MPI only
# (compare.sh launches build-openmpi with mpirun).
bench_perf_tables() {
    [ "$FLAVOR" = openmpi ] || return 0
    local d="$BENCH_DIR/perf_tables" b nt
    mkdir -p "$d/benchmarks" "$d/scripts" "$d/build-openmpi/benchmarks"
    cp "$BENCH_SRC/benchmarks/compare.sh" "$BENCH_SRC/benchmarks/perf_tables.sh" "$d/benchmarks/"
    cp "$BENCH_SRC/scripts/env.sh" "$d/scripts/"
    for b in allreduce bcast; do
        printf '#!/bin/sh\nexec %s "$@" -m 4:64 -i 2 -x 0\n' "$BENCH_BIN/fr_osu_$b" >"$d/build-openmpi/benchmarks/fr_osu_$b"
        chmod +x "$d/build-openmpi/benchmarks/fr_osu_$b"
    done
    timeout -k 15 "$TIMEOUT" bash "$d/benchmarks/perf_tables.sh" np 2 2 "$d/out" </dev/null >"$d/tables.out" 2>&1
    rc=$?
    nt=$(grep -cE '^(allreduce|bcast), np=2, ' "$d/tables.out")
    ok=0; [ "$rc" = 0 ] && [ "$nt" = 2 ] && [ -s "$d/out/round2.txt" ] && ok=1
    pass_fail $ok "perf_tables.sh np 2 2 without an MPICH build: exit $rc, $nt of 2 tables, round 2 $([ -s "$d/out/round2.txt" ] && echo ran || echo missing) (output: $d/tables.out)"
}

# --compare runs on the communicator osu_setup made, which osu_teardown
# destroys once (it stops the run when fr_comm_destroy fails: a second
# destroy of one communicator is FR_ERR_BAD_COMM)
bench_compare() {
    local rows
    bench_launch compare 2 "$BENCH_BIN/fr_osu_allreduce" -m 4:8 -i 2 -x 0 --compare shm,table
    rows=$(grep -cE '^[0-9]+ ' "$BENCH_DIR/compare.out")
    ok=0; [ "$rc" = 0 ] && [ "$rows" = 2 ] && ! grep -q fr_comm_destroy "$BENCH_DIR/compare.err" && ok=1
    pass_fail $ok "fr_osu_allreduce --compare shm,table np=2: exit $rc, $rows of 2 rows$(grep -m1 -o 'fr_comm_destroy failed.*' "$BENCH_DIR/compare.err" | sed 's/^/; /')"
}

# -i below --blocks: every header states the blocks the sizes were
# timed in (one a call), not --blocks
bench_blocks() {
    local run p n want="median (of|over) 3 blocks[; ]"
    for run in fr_osu_allreduce fr_osu_iallreduce "fr_osu_bcast --compare shm,table"; do
        # shellcheck disable=SC2086
        set -- $run
        p=$1; shift
        bench_launch "blocks-$p" 2 "$BENCH_BIN/$p" -m 4:8 -i 3 -x 1 "$@"
        n=$(grep -cE "$want" "$BENCH_DIR/blocks-$p.out")
        ok=0; [ "$rc" = 0 ] && [ "$n" = 1 ] && ok=1
        pass_fail $ok "$run -i 3 (--blocks 5): exit $rc, header: $(grep -m1 -oE 'median (of|over) [^;]*blocks[^;]*' "$BENCH_DIR/blocks-$p.out")"
    done
}

# The header's "# Timing:" line names the method: calls back to back by
# default, OSU's with --barrier (--vs-mpi and --compare too); the
# non-blocking programs refuse --barrier
bench_barrier() {
    local run p n want
    for run in "" "--vs-mpi" "--compare shm,table"; do
        for p in "" --barrier; do
            want="^# Timing: calls back to back; "
            [ -n "$p" ] && want="^# Timing: each call timed alone, a barrier after it \\(OSU's method\\); "
            # shellcheck disable=SC2086
            bench_launch barrier 2 "$BENCH_BIN/fr_osu_bcast" -m 16K:16K -i 5 -x 1 $run $p
            n=$(grep -cE "$want" "$BENCH_DIR/barrier.out")
            ok=0; [ "$rc" = 0 ] && [ "$n" = 1 ] && grep -qE '^16384 ' "$BENCH_DIR/barrier.out" && ok=1
            pass_fail $ok "fr_osu_bcast${run:+ $run}${p:+ $p}: exit $rc, $(grep -m1 -oE '^# Timing: [^;]*' "$BENCH_DIR/barrier.out" || echo 'no # Timing: line')"
        done
    done
    bench_launch barrier-nb 2 "$BENCH_BIN/fr_osu_ibcast" --barrier
    ok=0; [ "$rc" = 1 ] && grep -q '^fr_osu_ibcast: --barrier is for the blocking programs$' "$BENCH_DIR/barrier-nb.err" && ok=1
    pass_fail $ok "fr_osu_ibcast --barrier refused: exit $rc, $(head -n 1 "$BENCH_DIR/barrier-nb.err")"
}

# fr_osu_bcast's closing line calls one memcpy the limit at 2 ranks only
bench_bcast_limit() {
    local np n lim want
    for np in 2 3; do
        bench_launch limit-$np $np "$BENCH_BIN/fr_osu_bcast" -m 1:64 -i 5 -x 1
        n=$(grep -c '^# Largest size 64 B: latency .* x one memcpy of the message' "$BENCH_DIR/limit-$np.out")
        lim=$(grep -c 'the limit for 2 ranks' "$BENCH_DIR/limit-$np.out")
        want=0; [ $np = 2 ] && want=1
        ok=0; [ "$rc" = 0 ] && [ "$n" = 1 ] && [ "$lim" = $want ] && ok=1
        pass_fail $ok "fr_osu_bcast np=$np: exit $rc, $n closing line(s), $lim saying 'the limit for 2 ranks' (want $want)"
    done
}

# A size this node's memory cannot hold is refused with a message before
# any buffer is touched, not left to the OOM killer: a largest buffer
# above MemTotal (so that even a build without the check fails at the
# allocation rather than filling memory; not under overcommit_memory=1,
# where such a build would fill it)
bench_memory() {
    local kib run p g
    kib=$(sed -nE 's/^MemTotal: +([0-9]+) kB$/\1/p' /proc/meminfo 2>/dev/null)
    if [ -z "$kib" ] || ! grep -q '^MemAvailable:' /proc/meminfo || [ "$(cat /proc/sys/vm/overcommit_memory)" = 1 ]; then
        echo "SKIP: the benchmarks' memory check (no MemTotal/MemAvailable, or overcommit_memory=1)"
        return 0
    fi
    g=$((kib / 1048576 + 2))G
    for run in "fr_osu_allreduce -m $g" "fr_osu_ibcast -m $g" "fr_bench_group -n 2 -r 4:$g"; do
        # shellcheck disable=SC2086
        set -- $run
        p=$1; shift
        bench_launch "memory-$p" 2 "$BENCH_BIN/$p" "$@"
        ok=0
        [ "$rc" = 1 ] && grep -qE "^$p: the 2 ranks on this node would touch [0-9.]+ GiB \(.*\), more than the [0-9.]+ GiB MemAvailable of /proc/meminfo: give smaller sizes$" "$BENCH_DIR/memory-$p.err" && ok=1
        pass_fail $ok "$run np=2 (MemTotal $kib kB) refused: exit $rc, $(grep -m1 "^$p: " "$BENCH_DIR/memory-$p.err" | cut -c1-160)"
    done
}

# fr_trainer with a batch larger than a rank's shard (8192 samples over 2
# ranks: 4096) refuses before training, rather than taking no step and
# printing NaN
bench_trainer_batch() {
    local trainer=$top_builddir/examples/trainer/fr_trainer
    bench_launch trainer-batch 2 "$trainer" --make-data "$BENCH_DIR/trainer.data" --batch 5000 --epochs 1
    ok=0
    [ "$rc" != 0 ] && ! grep -q '^epoch ' "$BENCH_DIR/trainer-batch.out" &&
        grep -q "^fr_trainer: --batch 5000 is larger than the smallest rank's shard of the data set, 4096 samples (8192 over 2 ranks): no step could run; give --batch 4096 or less$" "$BENCH_DIR/trainer-batch.err" && ok=1
    pass_fail $ok "fr_trainer --batch 5000 np=2 (shards of 4096) refused: exit $rc, $(grep -m1 -E '^(fr_trainer: --batch|epoch )' "$BENCH_DIR/trainer-batch.out" "$BENCH_DIR/trainer-batch.err" | cut -d: -f2- | cut -c1-120)"
}

# fr_trainer's epoch line names the messages its grouped calls make on its
# communicator's settings: with FASTREDUCE_FUSION_BUFFER_MAX=8K the middle
# layer's 16 KiB weights go alone, their bias apart; the sizes it names
# are those FASTREDUCE_DEBUG=INFO logs the allreduces of (on the data file
# bench_trainer_batch made)
bench_trainer_fusion() {
    local trainer=$top_builddir/examples/trainer/fr_trainer named made
    BENCH_ENV=(FASTREDUCE_FUSION_BUFFER_MAX=8K FASTREDUCE_DEBUG=INFO)
    bench_launch trainer-fusion 2 "$trainer" --data "$BENCH_DIR/trainer.data" --epochs 1
    BENCH_ENV=()
    named=$(sed -nE 's/^epoch 1: .*; fastreduce: (.*)$/\1/p' "$BENCH_DIR/trainer-fusion.out" | grep -oE '[0-9]+ B' |
            awk '{print $1}' | sort -n | tr '\n' ' ')
    made=$(grep -oE ' allreduce [0-9]+ bytes' "$BENCH_DIR/trainer-fusion.err" | awk '{print $2}' | sort -nu | tr '\n' ' ')
    ok=0; [ "$rc" = 0 ] && [ -n "$made" ] && [ "$named" = "$made" ] && [ "$made" = "256 1040 4352 16384 " ] && ok=1
    pass_fail $ok "fr_trainer np=2 FASTREDUCE_FUSION_BUFFER_MAX=8K: exit $rc, the epoch line names ${named:-nothing}(bytes), the allreduces made ${made:-none}(want 256 1040 4352 16384)"
}

bench_suite() {
    rm -rf "$BENCH_DIR"; mkdir -p "$BENCH_DIR"
    bench_perf_tables
    bench_compare
    bench_blocks
    bench_barrier
    bench_bcast_limit
    bench_memory
    bench_trainer_batch
    bench_trainer_fusion
}
