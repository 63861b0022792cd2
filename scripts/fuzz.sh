#!/usr/bin/env bash
# scripts/fuzz.sh [SECONDS]: build the libFuzzer targets of tests/fuzz/ with
# ASan+UBSan (clang) into build-fuzz/, then run each for SECONDS (default 60),
# two at a time, on a copy of its seed corpus. Prints one line per target,
# "fuzz_NAME: N runs, OK|FAILED", then "fuzz: N passed, M failed", and exits non-zero when any target found a
# crash, leak or undefined behaviour (its reproducer and log stay in
# build-fuzz/run/NAME/). Needs no ./configure: the library sources are
# compiled directly, as a CPU-only build (no CUDA, no NCCL).
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
secs=${1:-60}
case $secs in ''|*[!0-9]*|0*) echo "usage: $0 [SECONDS per target]" >&2; exit 2 ;; esac
out=$top/build-fuzz
targets=(table tune algo topo)
CC=${CC:-clang}
MPICC=${MPICC:-mpicc}
command -v "$CC" >/dev/null || { echo "fuzz.sh: $CC not found (apt-get install clang)" >&2; exit 1; }

# ---- flags: MPI (Open MPI's wrapper, else MPICH's), UCX and hwloc -----------
if mpi_c=$($MPICC -showme:compile 2>/dev/null) && mpi_l=$($MPICC -showme:link 2>/dev/null); then :
elif mpi_c=$($MPICC -compile_info 2>/dev/null) && mpi_l=$($MPICC -link_info 2>/dev/null); then
    mpi_c=$(printf '%s\n' $mpi_c | grep -E '^-[ID]' | tr '\n' ' ')   # MPICH prints a whole command line
    mpi_l=$(printf '%s\n' $mpi_l | grep -E '^-[lLW]' | tr '\n' ' ')
else echo "fuzz.sh: no $MPICC" >&2; exit 1; fi
deps_c="$(pkg-config --cflags ucx hwloc)" && deps_l="$(pkg-config --libs ucx hwloc)" || exit 1
san=(-g -O1 -fsanitize=address,undefined -fno-sanitize-recover=undefined)
# config.h: device.c and nccl.c only ask whether CUDA and NCCL are built in; they are not here.
mkdir -p "$out/gen" "$out/obj" "$out/bin"
echo "/* scripts/fuzz.sh: a CPU-only build */" > "$out/gen/config.h"
inc=(-I"$top/include" -I"$top/lib/core" -I"$top/topology" -I"$top/lib/transport" -I"$top/algorithms"
     -I"$top/lib/select" -I"$top/lib/api" -I"$out/gen"
     -DFR_TUNE_DIR='"/nonexistent/fastreduce"' $mpi_c $deps_c)

# ---- build: the library (coverage-instrumented, its warnings are not this
# script's business) into one archive, then the targets
srcs=()
for f in "$top"/lib/*/*.c "$top"/topology/*.c "$top"/algorithms/*.c; do
    case ${f#"$top"/} in
        lib/api/interpose.c|lib/api/nccl_tuner_shim.c) ;;   # the interposer and the NCCL module: libraries of their own
        *) srcs+=("$f") ;;
    esac
done
export CC top out
compile() {   # $1: a source; the object is named after its path
    local o=$out/obj/$(echo "${1#"$top"/}" | tr / _).o
    [ "$o" -nt "$1" ] && return 0
    "$CC" "${@:2}" -fsanitize=fuzzer-no-link -w -c "$1" -o "$o" || { echo "fuzz.sh: cannot compile $1" >&2; return 1; }
}
export -f compile
# (other flags, or a header change, rebuild everything)
flags="$CC ${san[*]} ${inc[*]}"
[ "$(cat "$out/flags" 2>/dev/null)" = "$flags" ] || rm -f "$out"/obj/*.o
echo "$flags" > "$out/flags"
newest_h=$(ls -t "$top"/include/*.h "$top"/lib/*/*.h "$top"/topology/*.h "$top"/algorithms/*.h | head -1)
for o in "$out"/obj/*.o; do [ -e "$o" ] && [ "$newest_h" -nt "$o" ] && rm -f "$o"; done
printf '%s\n' "${srcs[@]}" | xargs -P 2 -I{} bash -c 'compile "$@"' _ {} "${san[@]}" "${inc[@]}" || exit 1
rm -f "$out/libfr_fuzz.a"
ar rcs "$out/libfr_fuzz.a" "$out"/obj/*.o || exit 1
for n in "${targets[@]}"; do
    "$CC" "${san[@]}" -fsanitize=fuzzer -Wall -Wextra "${inc[@]}" "$top/tests/fuzz/fuzz_$n.c" "$out/libfr_fuzz.a" \
        $mpi_l $deps_l -lm -lpthread -ldl -o "$out/bin/fuzz_$n" || { echo "fuzz.sh: cannot build fuzz_$n" >&2; exit 1; }
done

# ---- run: two at a time, each on a fresh copy of its seed corpus ------------
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$top/tests/fuzz/lsan.supp:print_suppressions=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export FASTREDUCE_DEBUG=NONE UCX_HANDLE_ERRORS=none   # (UCX would catch a crash before ASan)
unset FASTREDUCE_TOPO_XML HWLOC_XMLFILE
run_one() {
    local n=$1 d=$out/run/$1
    rm -rf "$d"; mkdir -p "$d/corpus"
    cp "$top/tests/fuzz/corpus/$n/"* "$d/corpus/" 2>/dev/null
    local dict=(); [ -f "$top/tests/fuzz/fuzz_$n.dict" ] && dict=(-dict="$top/tests/fuzz/fuzz_$n.dict")
    "$out/bin/fuzz_$n" -max_total_time="$secs" -timeout=25 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$d/" "${dict[@]}" "$d/corpus" > "$d/log" 2>&1
    echo $? > "$d/rc"
}
start=$(date +%s)
for ((i = 0; i < ${#targets[@]}; i += 2)); do
    run_one "${targets[i]}" &
    [ $((i + 1)) -lt ${#targets[@]} ] && run_one "${targets[i + 1]}" &
    wait
done
status=0
npass=0
for n in "${targets[@]}"; do
    d=$out/run/$n
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$d/log" | tail -1)
    rc=$(cat "$d/rc" 2>/dev/null || echo 1)
    if [ "$rc" = 0 ] && ! grep -qE '^(==[0-9]+==ERROR|SUMMARY: )|runtime error:' "$d/log"; then
        echo "fuzz_$n: ${runs:-0} runs, OK"
        npass=$((npass + 1))
    else
        echo "fuzz_$n: ${runs:-0} runs, FAILED"
        status=1
        grep -m4 -E '==ERROR|runtime error:|fuzz check failed|SUMMARY:|Test unit written' "$d/log" | sed 's/^/    /'
    fi
done
echo "fuzz.sh: ${#targets[@]} targets x ${secs} s in $(($(date +%s) - start)) s of fuzzing; logs in ${out#"$top"/}/run/"
echo "fuzz: $npass passed, $((${#targets[@]} - npass)) failed"
exit $status
