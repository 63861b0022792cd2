#!/usr/bin/env bash
# The Python package's tests (python/tests) under mpirun at 2 and 3 ranks,
# against a build: a virtual environment in BUILD_DIR/pyenv gets numpy,
# pytest and mpi4py (built with that build's MPI compiler) from PyPI.
# Usage: scripts/test_python.sh BUILD_DIR MPICC MPIEXEC
# Ends with "python: N passed, M failed".
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=$1; mpicc=$2; mpiexec=$3
. "$top/scripts/env.sh"
venv=$build/pyenv
py=/usr/bin/python3; [ -x "$py" ] || py=python3
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import numpy, pytest, mpi4py" 2>/dev/null; then
    "$py" -m venv "$venv" && "$venv/bin/pip" install -q --upgrade pip >/dev/null &&
        "$venv/bin/pip" install -q numpy pytest && MPICC=$mpicc "$venv/bin/pip" install -q --no-binary mpi4py mpi4py ||
        { echo "python: could not set up $venv (numpy, pytest, mpi4py from PyPI)"; echo "python: 0 passed, 1 failed"; exit 1; }
fi
export FASTREDUCE_LIB=$build/lib/.libs/libfastreduce.so PYTHONPATH=$top/python FASTREDUCE_TUNE_PATH= PYTHONDONTWRITEBYTECODE=1
passed=0; failed=0
for np in 2 3; do
    flags=(); [[ $mpiexec == mpirun* ]] && flags=(--oversubscribe --bind-to none -x FASTREDUCE_LIB -x PYTHONPATH -x FASTREDUCE_TUNE_PATH -x PYTHONDONTWRITEBYTECODE)
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
echo "python: $passed passed, $failed failed"
[ $failed -eq 0 ]
