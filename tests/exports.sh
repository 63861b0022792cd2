#!/usr/bin/env bash
# What each installed library exports is its public interface and nothing
# else: libfastreduce.so the functions include/fastreduce.h declares with
# FR_API (every one of them) and the NCCL tuner plugin's structures;
# libfastreduce-mpi.so the MPI functions it takes the place of;
# libnccl-tuner-fastreduce.so the plugin's structures. The NCCL tuner
# module must hand NCCL the plugin of libfastreduce.so when nothing else in
# the process has one. Ends with "exports: N passed, M failed".
# Usage: tests/exports.sh [LIBDIR]   (default: the build tree's lib/.libs;
#   install_check.sh passes the installed prefix's lib)
set -u
here=$(cd "$(dirname "$0")" && pwd)
top_srcdir=$(cd "${srcdir:-$here}/.." && pwd)
libdir=${1:-${top_builddir:-$top_srcdir/build-openmpi}/lib/.libs}
header=$top_srcdir/include/fastreduce.h
passed=0; failed=0
ok() { passed=$((passed + 1)); }
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }

plugin='ncclTunerPlugin_v3 ncclTunerPlugin_v4 ncclTunerPlugin_v5'
public=$(sed -n 's/^FR_API .*[ *]\([A-Za-z_][A-Za-z0-9_]*\)(.*/\1/p' "$header" | sort)
[ "$(echo "$public" | wc -w)" -ge 20 ] && ok || fail "$header: too few FR_API declarations read: $public"

# check LIB ALLOWED...: LIB's defined dynamic symbols are exactly ALLOWED.
check() {
    local lib=$libdir/$1; shift
    if [ ! -e "$lib" ]; then fail "$lib: missing"; return; fi
    local got want
    got=$(nm -D --defined-only "$lib" | awk '{print $NF}' | grep -v '^_\(init\|fini\|edata\|end\|_bss_start\)$' | sort -u)
    want=$(printf '%s\n' "$@" | sort -u)
    local extra missing
    extra=$(comm -23 <(echo "$got") <(echo "$want"))
    missing=$(comm -13 <(echo "$got") <(echo "$want"))
    [ -z "$extra" ] && ok || fail "${lib##*/} exports what is not public: $(echo $extra)"
    [ -z "$missing" ] && ok || fail "${lib##*/} lacks: $(echo $missing)"
    echo "${lib##*/}: $(echo "$got" | wc -l) exported symbols"
}
check libfastreduce.so $public $plugin
check libfastreduce-mpi.so MPI_Allreduce MPI_Bcast MPI_Iallreduce MPI_Ibcast MPI_Alloc_mem MPI_Free_mem MPI_Comm_free \
    MPI_Request_get_status
check libnccl-tuner-fastreduce.so $plugin

# The module alone (as NCCL in a program without fastreduce opens it) gives
# the plugin of the libfastreduce.so beside it: its name is "fastreduce".
name=$(python3 - "$libdir/libnccl-tuner-fastreduce.so" <<'EOF'
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_LOCAL)
v5 = ctypes.c_char_p.in_dll(lib, "ncclTunerPlugin_v5")
print(v5.value.decode() if v5.value else "(none)")
EOF
)
[ "$name" = fastreduce ] && ok || fail "the NCCL tuner module alone names its plugin '$name', not 'fastreduce'"

# ... and does not link it: a program with its own copy of the library
# must not get a second one through NCCL.
if readelf -d "$libdir/libnccl-tuner-fastreduce.so" 2>/dev/null | grep -q 'NEEDED.*libfastreduce'; then
    fail "libnccl-tuner-fastreduce.so links libfastreduce (a second copy in programs that have their own)"
else
    ok
fi

echo "exports: $passed passed, $failed failed"
[ "$failed" = 0 ]
