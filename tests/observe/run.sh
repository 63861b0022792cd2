#!/usr/bin/env bash
# The observability tests (tests/observe/check.py): a real Prometheus server
# scrapes a 2- and a 4-rank job, the node exporter's textfile output is read
# with prometheus_client's parser, the timeline of a 3-rank job with a late
# rank is merged by tools/fastreduce-trace, and malformed settings warn.
# Usage: tests/observe/run.sh BUILD_DIR MPIEXEC
# Ends with "observe: N passed, M failed"; exit status 77 where Prometheus
# is missing (scripts/deps.sh installs it).
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "$1" && pwd) || { echo "observe: 0 passed, 1 failed (no build directory $1)"; exit 1; }
mpiexec=$2
. "$top/scripts/env.sh"
venv=${FR_PYENV:-$top/build-pyenv}
command -v prometheus >/dev/null || { echo "observe: prometheus not found (apt-get install prometheus): skipped"; exit 77; }
[ -x "$venv/bin/python" ] || python3 -m venv "$venv" || { echo "observe: 0 passed, 1 failed (no venv $venv)"; exit 1; }
if ! "$venv/bin/python" -c "import prometheus_client" 2>/dev/null; then
    "$venv/bin/python" -m pip install -q prometheus_client ||
        { echo "observe: 0 passed, 1 failed (prometheus_client from PyPI)"; exit 1; }
fi
exec "$venv/bin/python" "$top/tests/observe/check.py" --build "$build" --mpiexec "$mpiexec" --top "$top"
