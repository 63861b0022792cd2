#!/usr/bin/env bash
# The Python package's tests (python/tests) under MPIEXEC at 2 and 3 ranks,
# against a build, then the installed package: a wheel of python/ installed
# in the virtual environment, the library installed in the build's prefix and
# found through pkg-config alone, one allreduce at 2 ranks.
# One virtual environment, build-pyenv/ beside the build directories (reused,
# shared by the builds), gets numpy, pytest and torch (only when `import
# torch` fails: several GB) from PyPI; mpi4py, built with MPICC, goes into
# BUILD_DIR/pympi (on PYTHONPATH), rebuilt when the MPI library it links is
# not the one libfastreduce links.
# Usage: scripts/test_python.sh BUILD_DIR MPICC MPIEXEC
#   e.g. build-openmpi mpicc mpirun, build-mpich mpicc.mpich mpiexec.mpich
# Ends with "python: N passed, M failed".
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "$1" && pwd) || { echo "python: no build directory $1"; echo "python: 0 passed, 1 failed"; exit 1; }
mpicc=$2; mpiexec=$3
. "$top/scripts/env.sh"
lib=$build/lib/.libs/libfastreduce.so
venv=${FR_PYENV:-$top/build-pyenv}
pympi=$build/pympi
py=/usr/bin/python3; [ -x "$py" ] || py=python3
setup_failed() { echo "python: could not set up $venv ($1)"; echo "python: 0 passed, 1 failed"; exit 1; }
# The MPI libraries (libmpi.so.40, libmpich.so.12, ...) a shared object links.
mpi_libs() { ldd "$1" 2>/dev/null | awk '$1 ~ /^libmpi/ {print $1}' | sort -u | tr '\n' ' '; }

if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import numpy, pytest" 2>/dev/null; then
    "$py" -m venv "$venv" && "$venv/bin/python" -m pip install -q --upgrade pip >/dev/null &&
        "$venv/bin/python" -m pip install -q numpy pytest || setup_failed "numpy, pytest from PyPI"
fi
if ! "$venv/bin/python" -c "import torch" 2>/dev/null; then
    # Large (the CUDA wheels, about 5 GB installed): once, in the venv that
    # the builds share and that stays in the build tree.
    echo "python: installing torch from PyPI into $venv (large, once)"
    "$venv/bin/python" -m pip install -q torch || setup_failed "torch from PyPI"
fi
# mpi4py's MPI extension
mpi4py_so() { ls "$pympi"/mpi4py/MPI.*.so 2>/dev/null | head -1; }
want=$(mpi_libs "$lib")
[ -n "$want" ] || { echo "python: $lib is missing or links no MPI library"; echo "python: 0 passed, 1 failed"; exit 1; }
so=$(mpi4py_so)
if [ -z "$so" ] || [ "$(mpi_libs "$so")" != "$want" ]; then
    # --no-cache-dir: pip's wheel cache does not know MPICC and would hand back
    # an mpi4py built with another MPI.
    rm -rf "$pympi"
    MPICC=$mpicc "$venv/bin/python" -m pip install -q --no-cache-dir --no-deps --no-binary mpi4py --target "$pympi" mpi4py ||
        setup_failed "mpi4py from PyPI built with $mpicc"
    so=$(mpi4py_so)
    [ -n "$so" ] && [ "$(mpi_libs "$so")" = "$want" ] ||
        setup_failed "mpi4py built with $mpicc links '$(mpi_libs "$so")', libfastreduce links '$want'"
fi

# FASTREDUCE_TEST_MPIEXEC: the launcher of the jobs that tests/test_exit.py starts
export FASTREDUCE_LIB=$lib PYTHONPATH=$top/python:$pympi FASTREDUCE_TUNE_PATH= PYTHONDONTWRITEBYTECODE=1 \
    FASTREDUCE_TEST_MPIEXEC=$mpiexec
passed=0; failed=0
for np in 2 3; do
    flags=(); [[ $mpiexec == mpirun* ]] && flags=(--oversubscribe --bind-to none -x FASTREDUCE_LIB -x PYTHONPATH -x FASTREDUCE_TUNE_PATH -x PYTHONDONTWRITEBYTECODE -x FASTREDUCE_TEST_MPIEXEC)
    log=$build/python-np$np
    rm -f "$log".*
    # every rank runs the tests (they are collective), each into its own log
    timeout 600 $mpiexec "${flags[@]}" -n $np sh -c 'exec "$0" -m pytest -q -p no:cacheprovider "$1" >"$2.${OMPI_COMM_WORLD_RANK:-$PMI_RANK}" 2>&1' \
        "$venv/bin/python" "$top/python/tests" "$log"
    rc=$?
    p=$(cat "$log".* 2>/dev/null | grep -oE '[0-9]+ passed' | awk '{s += $1} END {print s + 0}')
    f=$(cat "$log".* 2>/dev/null | grep -oE '[0-9]+ (failed|error)' | awk '{s += $1} END {print s + 0}')
    if [ $rc -ne 0 ] || [ "$p" = 0 ]; then f=$((f + 1)); echo "FAIL: python np=$np (exit $rc)"; tail -20 "$log".0; fi
    echo "python np=$np: $p passed (over $np ranks), $f failed"
    passed=$((passed + p)); failed=$((failed + f))
done

# The installed package: `pip wheel` of a copy of python/ (setuptools writes
# build/ and fastreduce.egg-info beside pyproject.toml: not into the source
# tree), installed without dependencies in the venv; the library installed in
# the build's configured prefix (as scripts/install_check.sh does). The ranks
# run without FASTREDUCE_LIB and with only mpi4py on PYTHONPATH, outside
# python/, with PKG_CONFIG_PATH: the package must come from site-packages,
# its version be configure.ac's, and the library it loads be the prefix's.
unset FASTREDUCE_LIB
export PYTHONPATH=$pympi
prefix=$(sed -n 's/^prefix = //p' "$build/Makefile")
version=$(sed -n 's/^AC_INIT(\[[^]]*\], *\[\([^]]*\)\].*/\1/p' "$top/configure.ac")
work=$build/pywheel
rm -rf "$work" && mkdir -p "$work/src" "$work/run" && cp -R "$top/python/pyproject.toml" "$top/python/fastreduce" "$work/src/" &&
    find "$work/src" -name __pycache__ -prune -exec rm -rf {} +
check='
import os, sys
import numpy as np
from mpi4py import MPI
import fastreduce as fr
from importlib import import_module
from importlib.metadata import version
L = import_module("fastreduce._lib")   # the module: fastreduce._lib may name the loaded CDLL
prefix, want = sys.argv[1], sys.argv[2]
assert "FASTREDUCE_LIB" not in os.environ
assert os.path.realpath(fr.__file__).startswith(os.path.realpath(sys.prefix) + "/"), fr.__file__
assert version("fastreduce") == want, (version("fastreduce"), want)
found = L.find_library()
assert found and os.path.realpath(found) == os.path.realpath(prefix + "/lib/libfastreduce.so"), found
w = MPI.COMM_WORLD; me, n = w.Get_rank(), w.Get_size()
c = fr.Comm(w)
x = np.arange(1000, dtype=np.float32) + me
c.allreduce(x)
c.free()
assert np.array_equal(x, n * np.arange(1000, dtype=np.float32) + n * (n - 1) // 2), x[:4]
loaded = {os.path.realpath(l.split()[-1]) for l in open("/proc/self/maps") if "/libfastreduce.so" in l}
assert loaded == {os.path.realpath(found)}, loaded   # that one, and no other
print("installed package: ok (%s, %s)" % (os.path.dirname(fr.__file__), found))
'
flags=(); [[ $mpiexec == mpirun* ]] && flags=(--oversubscribe --bind-to none -x PKG_CONFIG_PATH -x PYTHONPATH -x FASTREDUCE_TUNE_PATH -x PYTHONDONTWRITEBYTECODE)
if ! out=$("$venv/bin/python" -m pip wheel -q --no-deps -w "$work" "$work/src" 2>&1); then
    echo "FAIL: pip wheel --no-deps python/"; echo "$out" | tail -10; failed=$((failed + 1))
elif ! out=$("$venv/bin/python" -m pip install -q --no-deps --force-reinstall "$work"/fastreduce-*.whl 2>&1); then
    echo "FAIL: pip install of $(cd "$work" && ls fastreduce-*.whl)"; echo "$out" | tail -10; failed=$((failed + 1))
elif ! make -C "$build" install >"$work/install.out" 2>&1; then
    echo "FAIL: make -C $build install"; tail -10 "$work/install.out"; failed=$((failed + 1))
elif out=$(cd "$work/run" && PKG_CONFIG_PATH=$prefix/lib/pkgconfig timeout 300 $mpiexec "${flags[@]}" -n 2 \
               "$venv/bin/python" -c "$check" "$prefix" "$version" 2>&1) &&
     [ "$(grep -o 'installed package: ok' <<<"$out" | wc -l)" = 2 ]; then
    echo "python installed package ($(cd "$work" && ls fastreduce-*.whl), $prefix): passed"; passed=$((passed + 1))
else
    echo "FAIL: the installed package (wheel in $venv, library from pkg-config in $prefix)"; echo "$out" | tail -20
    failed=$((failed + 1))
fi
# the source tree's package stays the only one the tests see
"$venv/bin/python" -m pip uninstall -q -y fastreduce >/dev/null 2>&1
echo "python: $passed passed, $failed failed"
[ $failed -eq 0 ]
