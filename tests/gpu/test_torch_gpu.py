"""fastreduce and fastreduce.torch on CUDA tensors (run by gpu_check.sh's
torch part under mpirun, one rank per GPU): every type on the device path,
asynchronous Works on the current stream, the grouped call, DDP over NCCL
with fastreduce's hook against DDP's own allreduce, and the
DistributedOptimizer against gradients averaged by hand (the model, data
and references of python/tests/test_torch.py)."""
import os
import sys

import numpy as np
import pytest
import torch
import torch.distributed as dist
from mpi4py import MPI

import fastreduce as fr
import fastreduce.torch as frt

# the CPU tests' model, data and references (python/tests, or the bundle's copy)
sys.path.insert(0, os.environ.get("FR_PYTHON_TESTS", os.path.join(os.path.dirname(__file__), "..", "..", "python",
                                                                      "tests")))
from test_torch import batch, by_hand, model, train_ddp  # noqa: E402

W = MPI.COMM_WORLD
ME, NP = W.Get_rank(), W.Get_size()
GPU = torch.device("cuda", ME % max(1, torch.cuda.device_count()))
TYPES = [torch.int8, torch.uint8, torch.int32, torch.int64, torch.float16, torch.bfloat16, torch.float32,
         torch.float64]

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU")


@pytest.fixture(scope="module")
def comm():
    torch.cuda.set_device(GPU)
    c = fr.Comm(W)
    yield c
    c.free()


def values(dtype, n, r):
    return torch.from_numpy(((np.arange(n) * 5 + r * 3) % 7).astype(np.int64)).to(dtype)


def reference(dtype, n, op):
    every = np.stack([values(torch.float64, n, r).numpy() for r in range(NP)])
    want = every.sum(0) if op == "sum" else every.max(0)
    return torch.from_numpy(want).to(dtype)


@pytest.mark.parametrize("dtype", TYPES, ids=str)
@pytest.mark.parametrize("op", ["sum", "max"])
def test_allreduce_and_bcast_on_the_device(comm, dtype, op):
    for n in (1, 1000, 1 << 20):
        t = values(dtype, n, ME).to(GPU)
        comm.allreduce(t, op=op)
        assert torch.equal(t.cpu(), reference(dtype, n, op))
        t = values(dtype, n, ME).to(GPU)
        w = comm.allreduce(t, op=op, async_op=True)
        w.wait()                    # the current stream waits; the host reads after a sync
        torch.cuda.current_stream().synchronize()
        assert w.is_completed()
        assert torch.equal(t.cpu(), reference(dtype, n, op))
        b = values(dtype, n, 0).to(GPU) if ME == 0 else torch.zeros(n, dtype=dtype, device=GPU)
        comm.bcast(b, root=0, async_op=True).wait()
        assert torch.equal(b.cpu(), values(dtype, n, 0))


def test_group_and_streams(comm):
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):   # the work follows the kernels of the current stream
        bufs = [(values(torch.float32, n, ME).to(GPU) * 1.0) for n in (3, 0, 70000, 1 << 18)]
        w = comm.allreduce_group(bufs, op="sum", async_op=True)
    w.wait()
    torch.cuda.synchronize()
    for t, n in zip(bufs, (3, 0, 70000, 1 << 18)):
        assert torch.equal(t.cpu(), reference(torch.float32, n, "sum"))
    if torch.cuda.device_count() > 1:
        other = torch.zeros(4, device=torch.device("cuda", (GPU.index + 1) % torch.cuda.device_count()))
        with pytest.raises(fr.ArgumentError, match="one GPU per rank"):
            comm.allreduce(other)


@pytest.fixture(scope="module")
def nccl(comm):
    frt.init_process_group("nccl", comm, device_id=GPU)
    yield
    dist.destroy_process_group()


@pytest.mark.parametrize("hook,tol", [("allreduce_hook", 1e-5), ("fp16_compress_hook", 3e-3)])
def test_ddp_nccl_hook(nccl, comm, hook, tol):
    ref = train_ddp(None, device=GPU)
    got = train_ddp(getattr(frt, hook), comm, device=GPU)
    for a, b in zip(ref, got):
        torch.testing.assert_close(b, a, rtol=tol, atol=tol)


@pytest.mark.parametrize("compression,tol", [("none", 1e-5), ("fp16", 3e-3), ("bf16", 3e-2)])
def test_optimizer_on_the_device(comm, compression, tol):
    steps = 3
    want = by_hand(lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9), steps, 1, False)
    m = model().to(GPU)
    opt = frt.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9), comm=comm,
                                   fusion_bytes=1000, compression=getattr(frt.Compression, compression))
    for s in range(steps):
        opt.zero_grad()
        x, y = batch(s, ME)
        torch.nn.functional.cross_entropy(m(x.to(GPU)), y.to(GPU)).backward()
        opt.step()
    for a, b in zip(want, m.parameters()):
        torch.testing.assert_close(b.detach().cpu(), a, rtol=tol, atol=tol)
