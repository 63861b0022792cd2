#!/usr/bin/env bash
# Every test: install what is missing, build with Open MPI (with CUDA and NCCL
# when found) and with MPICH (without them), run `make check` in both, the
# Python package's tests and the observability tests (tests/observe: a
# Prometheus server, the timeline; both builds), the reliability runs (sanitizers,
# valgrind, fuzzing, network namespaces) and make distcheck. Ends with the
# line "N passed, M failed".
# Environment: FR_SKIP_RELIABILITY=1 skips the reliability runs,
# FR_FUZZ_SECONDS=N fuzzes each target N s (default 60), FR_SKIP_DISTCHECK=1
# skips make distcheck.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/deps.sh" || exit 1
. "$top/scripts/env.sh"
passed=0; failed=0; status=0
# What failed, kept to be printed again at the end: CI shows a log's tail.
why=$(mktemp); trap 'rm -f "$why"' EXIT
# fail_lines FILE: FILE's FAIL/TIMEOUT lines and the four after each; false if none.
fail_lines() {
    grep -qE '^(FAIL|TIMEOUT)' "$1" 2>/dev/null || return 1
    grep -E -A4 '^(FAIL|TIMEOUT)' "$1" | head -n 60
}
# failed_tests DIR: for each automake test under DIR whose result is FAIL or
# ERROR, its FAIL/TIMEOUT lines (our suites) or its log's tail (Criterion).
failed_tests() {
    local t log
    for t in $(cd "$1" && ls -- *.trs */*.trs 2>/dev/null); do
        grep -qE '^:test-result: (FAIL|ERROR)' "$1/$t" || continue
        log=$1/${t%.trs}.log
        echo "--- ${log#"$top"/}"
        fail_lines "$log" || tail -n 40 "$log"
    done
}
# note_fails FILE: keep FILE's FAIL/TIMEOUT lines (and what follows each).
note_fails() {
    grep -qE '^(FAIL|TIMEOUT)' "$1" 2>/dev/null || return 0
    { echo "--- ${1#"$top"/}"; fail_lines "$1"; } >>"$why"
}
# Open MPI with CUDA and NCCL where /usr/local/cuda has them, MPICH configured
# without them: the whole suite runs in both configurations.
for mpi in openmpi mpich; do
    extra=(); [ "$mpi" = mpich ] && extra=(--without-cuda --without-nccl)
    echo "=== $mpi: build${extra[*]:+ (${extra[*]})}"
    if ! "$top/scripts/build.sh" "$mpi" "${extra[@]}"; then
        echo "=== $mpi: BUILD FAILED"; failed=$((failed + 1)); status=1; continue
    fi
    grep -E '^#define FR_BUILT_(CUDA|NCCL) ' "$top/build-$mpi/config.h" | sed 's/^#define /    /'
    if [ "$mpi" = openmpi ]; then
        echo "=== make doc (the public header's reference; warnings are errors)"
        if (cd "$top/build-$mpi" && make doc >doc.out 2>&1); then
            echo "doc: passed"; passed=$((passed + 1))
        else
            echo "doc: FAILED"; tail -20 "$top/build-$mpi/doc.out"; failed=$((failed + 1)); status=1
        fi
    fi
    echo "=== $mpi: make check"
    log="$top/build-$mpi/check.out"
    (cd "$top/build-$mpi" && make check -j1 2>&1) | tee "$log" | grep -E "^(PASS|FAIL|ERROR|XFAIL|SKIP|# )|passed, .* failed|Synthesis" || true
    if ! grep -q "^# FAIL: *0" "$log" || ! grep -q "^# ERROR: *0" "$log"; then
        status=1
        failed_tests "$top/build-$mpi/tests" | tee -a "$why"
    fi
    echo "=== $mpi: installed-prefix check (pkg-config, every algorithm forced)"
    case $mpi in openmpi) cc=mpicc; run=mpirun ;; mpich) cc=mpicc.mpich; run=mpiexec.mpich ;; esac
    "$top/scripts/install_check.sh" "$top/build-$mpi" "$cc" "$run" | tee "$top/build-$mpi/install_check.out" | grep -v "^$" | tail -3 || status=1
    note_fails "$top/build-$mpi/install_check.out"
    # Sum the checks each suite counted: Criterion's synthesis and our plain lines.
    while read -r p f; do passed=$((passed + p)); failed=$((failed + f)); done < <(
        cat "$top/build-$mpi"/tests/unit/*.log 2>/dev/null | sed -n 's/.*Tested: *[0-9]* *| *Passing: *\([0-9]*\) *| *Failing: *\([0-9]*\) *| *Crashing: *\([0-9]*\).*/\1 \2 \3/p' | awk '{print $1, $2+$3}'
        for l in mpi/run_mpi.sh.log topologies/golden.sh.log plot/test_plot.sh.log gpu/run_gpu.sh.log; do
            grep -E '^[0-9]+ passed, [0-9]+ failed' "$top/build-$mpi/tests/$l" 2>/dev/null | tail -n 1 | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed.*/\1 \2/p'
        done
        sed -n 's/^install_check: \([0-9]*\) passed, \([0-9]*\) failed.*/\1 \2/p' "$top/build-$mpi/install_check.out")
done
# The Python package against each build: mpi4py built with that build's MPI
# compiler in the build's own venv (scripts/test_python.sh).
for mpi in openmpi mpich; do
    case $mpi in openmpi) cc=mpicc; run=mpirun ;; mpich) cc=mpicc.mpich; run=mpiexec.mpich ;; esac
    [ -e "$top/build-$mpi/lib/.libs/libfastreduce.so" ] || continue
    echo "=== python: the fastreduce package under $run ($mpi build; numpy, pytest, torch, mpi4py from PyPI; the installed wheel)"
    "$top/scripts/test_python.sh" "$top/build-$mpi" "$cc" "$run" | tee "$top/build-$mpi/python.out" | grep -E "^(FAIL|python)" || status=1
    note_fails "$top/build-$mpi/python.out"
    read -r p f < <(sed -n 's/^python: \([0-9]*\) passed, \([0-9]*\) failed.*/\1 \2/p' "$top/build-$mpi/python.out")
    passed=$((passed + ${p:-0})); failed=$((failed + ${f:-1}))
    # Observability: a real Prometheus server scrapes the ranks, the textfile
    # parses with prometheus_client, the merged timeline names the late rank.
    echo "=== observe: metrics and timeline under $run ($mpi build; Prometheus, prometheus_client)"
    "$top/tests/observe/run.sh" "$top/build-$mpi" "$run" >"$top/build-$mpi/observe.out" 2>&1
    rc=$?
    grep -E "^(FAIL|observe)" "$top/build-$mpi/observe.out"
    note_fails "$top/build-$mpi/observe.out"
    if [ $rc = 77 ]; then
        echo "observe: skipped"
    else
        read -r p f < <(sed -n 's/^observe: \([0-9]*\) passed, \([0-9]*\) failed.*/\1 \2/p' "$top/build-$mpi/observe.out")
        [ $rc = 0 ] || status=1
        passed=$((passed + ${p:-0})); failed=$((failed + ${f:-1}))
    fi
done
# Reliability: ASan+UBSan, ThreadSanitizer, valgrind memcheck, the libFuzzer
# targets, and two hosts made of network namespaces (root only). Each ends
# with a line "NAME: N passed, M failed" that is added in.
if [ "${FR_SKIP_RELIABILITY:-0}" != 1 ]; then
    for step in sanitize tsan valgrind fuzz netns; do
        case $step in
            sanitize) cmd=("$top/scripts/sanitize.sh") ;;
            tsan) cmd=("$top/scripts/sanitize.sh" --thread) ;;
            valgrind) cmd=("$top/scripts/valgrind.sh") ;;
            fuzz) cmd=("$top/scripts/fuzz.sh" "${FR_FUZZ_SECONDS:-60}") ;;
            netns) cmd=(env FR_NETNS_LINKCUT=1 "$top/tests/netns/run.sh") ;;
        esac
        echo "=== $step"
        out="$top/build-openmpi/$step.out"
        "${cmd[@]}" >"$out" 2>&1
        rc=$?
        grep -E "^(PASS|FAIL|SKIP)|^$step: " "$out" | tail -40
        note_fails "$out"
        read -r p f < <(sed -n "s/^$step: \([0-9]*\) passed, \([0-9]*\) failed.*/\1 \2/p" "$out" | tail -n 1)
        if [ "$rc" = 77 ]; then
            echo "$step: skipped"
        elif [ "$rc" != 0 ] || [ -z "${p:-}" ]; then
            echo "$step: FAILED (exit $rc), see ${out#"$top"/}"; tail -20 "$out"
            passed=$((passed + ${p:-0})); failed=$((failed + ${f:-0} + 1)); status=1
        else
            passed=$((passed + p)); failed=$((failed + f))
        fi
    done
fi
if [ "${FR_SKIP_DISTCHECK:-0}" != 1 ]; then
    echo "=== make distcheck (Open MPI; the tarball builds, installs and passes a smoke run)"
    if (cd "$top/build-openmpi" && FASTREDUCE_TEST_QUICK=1 FR_TEST_SMOKE=1 make distcheck >distcheck.out 2>&1); then
        echo "distcheck: passed"; passed=$((passed + 1))
    else
        echo "distcheck: FAILED"; tail -30 "$top/build-openmpi/distcheck.out"; failed=$((failed + 1)); status=1
        # what failed inside the distcheck tree (it is kept when distcheck fails)
        find "$top/build-openmpi" -path '*/_build/*' -name '*.log' -path '*tests*' -exec grep -HE '^(FAIL|TIMEOUT)' {} + 2>/dev/null | head -40 | tee -a "$why"
    fi
fi
[ $status -ne 0 ] && [ $failed -eq 0 ] && failed=1
if [ -s "$why" ]; then echo "=== what failed"; cat "$why"; fi
echo "$passed passed, $failed failed"
exit $status
