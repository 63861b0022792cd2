"""Exiting with collectives still running: rank 0 launches small 2-rank
jobs (the MPI's launcher, FASTREDUCE_TEST_MPIEXEC, which
scripts/test_python.sh sets) whose ranks exit while a collective they
started is pending, and reads their exit status and output."""
import os
import shutil
import subprocess
import sys

import pytest
from mpi4py import MPI

W = MPI.COMM_WORLD
ME, NP = W.Get_rank(), W.Get_size()

# Each child rank registers a check before it imports fastreduce: atexit
# runs it after fastreduce's own exit handler, so it sees what exit left.
PROLOGUE = """
import atexit, sys
from mpi4py import MPI
me = MPI.COMM_WORLD.Get_rank()
def after():
    print("rank %d after exit: %s" % (me, result()), flush=True)
atexit.register(after)
import numpy as np, torch, fastreduce as fr, fastreduce.torch as frt
c = fr.Comm()
"""
# the reduction of a shared-memory array, started and never waited for;
# the result seen after fastreduce's exit handler: 1 + 2 = 3 everywhere
SHARED = PROLOGUE + """
a = fr.empty(1 << 22)
a[:] = me + 1
w = c.allreduce(a, async_op=True)
result = lambda: "%s %s" % (a.min(), a.max())
"""
# an exception between backward() and step(): the buckets (shared memory)
# were started by backward; the program dies of the exception
OPTIMIZER = PROLOGUE + """
m = torch.nn.Linear(1000, 1000)
opt = frt.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.1), comm=c)
m(torch.ones(1, 1000)).sum().backward()
result = lambda: "grad %s" % (opt._fr_buckets[0].work._done,)
raise RuntimeError("between backward and step")
"""


def launch(script, tmp):
    """(exit status, output) of @p script run by 2 ranks of a job of their own."""
    mpiexec = os.environ.get("FASTREDUCE_TEST_MPIEXEC") or \
        ("mpirun" if "Open MPI" in MPI.Get_library_version() and shutil.which("mpirun") else None)
    if not mpiexec:
        return None, "no MPI launcher: set FASTREDUCE_TEST_MPIEXEC (scripts/test_python.sh does)"
    path = os.path.join(tmp, "child.py")
    with open(path, "w") as f:
        f.write(script)
    # the job's own environment: none of this job's launcher variables
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OMPI_", "PMIX_", "PMI_", "HYDRA_", "HYDI_", "MPI_LOCAL")) or k.startswith("OMPI_ALLOW")}
    flags = ["--oversubscribe", "--bind-to", "none"] if os.path.basename(mpiexec).startswith("mpirun") else []
    try:
        r = subprocess.run([mpiexec, *flags, "-n", "2", sys.executable, path], env=env, capture_output=True, text=True,
                           timeout=180)
    except subprocess.TimeoutExpired as e:
        return "timeout", (e.stdout or b"").decode(errors="replace") + (e.stderr or b"").decode(errors="replace")
    return r.returncode, r.stdout + r.stderr


def run_child(script, tmp_path):
    """Rank 0 launches; every rank gets (status, output)."""
    if NP != 2:
        pytest.skip("the jobs are launched once, by the 2-rank run")
    got = launch(script, str(tmp_path)) if ME == 0 else None
    got = W.bcast(got, root=0)
    if got[0] is None:
        pytest.skip(got[1])
    return got


def test_exit_with_a_pending_shared_memory_allreduce(tmp_path):
    status, out = run_child(SHARED, tmp_path)
    assert status == 0 and "signal" not in out, out
    for r in range(2):   # waited for at exit, and complete: 1 + 2 on both ranks
        assert "rank %d after exit: 3.0 3.0" % r in out, out
    assert "waiting at exit for 1 collective(s) started and not waited for" in out, out


def test_exception_between_backward_and_step(tmp_path):
    status, out = run_child(OPTIMIZER, tmp_path)
    # the exception's exit status and traceback, not a crash
    assert status == 1 and "signal" not in out, out
    assert "RuntimeError: between backward and step" in out, out
    for r in range(2):
        assert "rank %d after exit: grad True" % r in out, out
