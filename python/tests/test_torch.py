"""fastreduce with torch under mpirun (2 and 3 ranks): tensors of every type,
asynchronous handles, the DDP hooks against DDP's own allreduce over gloo,
the DistributedOptimizer against gradients averaged by hand, and the
broadcasts. References are computed from every rank's inputs on every
rank (each rank can make every rank's data), never with fastreduce."""
import contextlib
import copy
import gc
import weakref

import numpy as np
import pytest
import torch
import torch.distributed as dist
from mpi4py import MPI
from torch.nn.parallel import DistributedDataParallel as DDP

import fastreduce as fr
import fastreduce.torch as frt

W = MPI.COMM_WORLD
ME, NP = W.Get_rank(), W.Get_size()
TYPES = [torch.int8, torch.uint8, torch.int32, torch.uint32, torch.int64, torch.uint64, torch.float16,
         torch.bfloat16, torch.float32, torch.float64]


@pytest.fixture(scope="module")
def comm():
    c = fr.Comm(W)
    yield c
    c.free()


@pytest.fixture(scope="module")
def gloo(comm):
    """torch.distributed over gloo, for DDP."""
    frt.init_process_group("gloo", comm)
    yield
    dist.destroy_process_group()


def values(dtype, n, r):
    """Rank r's input: small integers, exact in every type and in their sums."""
    return torch.from_numpy(((np.arange(n) * 5 + r * 3) % 7).astype(np.int64)).to(dtype)


def reference(dtype, n, op):
    every = np.stack([values(torch.float64, n, r).numpy() for r in range(NP)]) if n else np.zeros((NP, 0))
    want = {"sum": every.sum(0), "max": every.max(0), "min": every.min(0), "prod": every.prod(0),
            "avg": every.sum(0) / NP}[op]
    if not dtype.is_floating_point and op == "avg":
        want = np.trunc(want)
    return torch.from_numpy(want).to(dtype)


def same_on_every_rank(t):
    got = W.allgather(t.detach().reshape(-1).view(torch.uint8).numpy().tobytes())
    return all(g == got[0] for g in got)


# ------------------------------------------------------------ the package

@pytest.mark.parametrize("dtype", TYPES, ids=str)
@pytest.mark.parametrize("op", ["sum", "max", "avg"])
@pytest.mark.parametrize("n", [0, 1, 1000, 70001])
def test_allreduce_tensor(comm, dtype, op, n):
    want = reference(dtype, n, op)
    out = torch.full((n,), 9, dtype=dtype)
    mine = values(dtype, n, ME)
    assert comm.allreduce(mine, out, op=op) is out
    assert torch.equal(out, want)
    assert torch.equal(mine, values(dtype, n, ME))   # sendbuf untouched
    inplace = values(dtype, n, ME)
    work = comm.allreduce(inplace, op=op, async_op=True)
    assert work.wait() is True
    assert work.is_completed() and work.result() is inplace
    assert torch.equal(inplace, want)


@pytest.mark.parametrize("dtype", TYPES, ids=str)
def test_bcast_tensor_every_root(comm, dtype):
    for root in range(NP):
        for n in (0, 3, 100003):
            t = values(dtype, n, root) if ME == root else torch.zeros(n, dtype=dtype)
            works = [comm.bcast(t, root=root, async_op=True)]
            for w in works:
                w.wait()
            assert torch.equal(t, values(dtype, n, root))
            t2 = values(dtype, n, root) if ME == root else torch.zeros(n, dtype=dtype)
            comm.bcast(t2.view(-1), root=root)
            assert torch.equal(t2, values(dtype, n, root))


def test_many_async_in_flight(comm):
    """Requests of mixed kinds and sizes in flight together, completed out of
    their order of start; each result checked."""
    sizes = [0, 1, 17, 4096, 65537, 300000]
    ts = [values(torch.float32, n, ME) for n in sizes]
    group = [values(torch.float64, n, ME) for n in reversed(sizes)]
    b = values(torch.int32, 5000, 1 % NP) if ME == 1 % NP else torch.zeros(5000, dtype=torch.int32)
    works = [comm.allreduce(t, op="sum", async_op=True) for t in ts]
    works.append(comm.allreduce_group(group, op="max", async_op=True))
    works.append(comm.bcast(b, root=1 % NP, async_op=True))
    for w in reversed(works):
        w.wait()
    for t, n in zip(ts, sizes):
        assert torch.equal(t, reference(torch.float32, n, "sum"))
    for t, n in zip(group, reversed(sizes)):
        assert torch.equal(t, reference(torch.float64, n, "max"))
    assert torch.equal(b, values(torch.int32, 5000, 1 % NP))


def test_group_uneven(comm):
    sizes = [3, 0, 70000, 1, 0, 1 << 17, 5]
    for op in ("sum", "avg"):
        bufs = [values(torch.float32, n, ME) for n in sizes]
        assert comm.allreduce_group(bufs, op=op) is not None
        for t, n in zip(bufs, sizes):
            assert torch.equal(t, reference(torch.float32, n, op))
    assert comm.allreduce_group([]) == []


def test_is_completed_polls(comm):
    t = values(torch.float32, 1 << 20, ME)
    w = comm.allreduce(t, async_op=True)
    while not w.is_completed():
        pass
    assert torch.equal(t, reference(torch.float32, 1 << 20, "sum"))
    assert w.wait() is True   # again: nothing left to do


def test_bad_tensors_leave_everything_as_it_was(comm):
    a = values(torch.float32, 16, ME)
    keep = a.clone()
    cases = [
        (lambda: comm.allreduce(torch.ones(4, 4)[:, 1]), "not contiguous"),
        (lambda: comm.allreduce(torch.ones(3, dtype=torch.int16)), "torch.int16 is not one of"),
        (lambda: comm.allreduce(torch.ones(3, dtype=torch.bool)), "torch.bool is not one of"),
        (lambda: comm.allreduce(a, torch.zeros(16, dtype=torch.float64)), "differ in type"),
        (lambda: comm.allreduce(a, torch.zeros(15)), "differ in type or length"),
        (lambda: comm.allreduce_group([a, torch.zeros(3, dtype=torch.float64)]), "mix element types"),
        (lambda: comm.allreduce(a.to_sparse()), "dense"),
        (lambda: comm.allreduce(torch.empty(3, device="meta")), "device meta"),
        (lambda: comm.allreduce(a, op="xor"), "op 'xor'"),
        (lambda: comm.bcast(a, root=NP), "FR_ERR_ROOT"),
    ]
    for call, message in cases:
        with pytest.raises(fr.ArgumentError, match=message):
            call()
        assert torch.equal(a, keep)
    comm.allreduce(a)   # the communicator still works
    assert torch.equal(a, reference(torch.float32, 16, "sum"))


def fake_cuda(n=1000, dtype=torch.float32):
    """A tensor that says it is on cuda:0, made without a GPU."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        return torch.empty(n, dtype=dtype, device="cuda")


@pytest.mark.filterwarnings("ignore:Accessing the data pointer of FakeTensor")
def test_cuda_tensor_takes_the_device_path(comm):
    t = fake_cuda()
    if fr.cuda_support():
        # the library's choice for device memory: NCCL's, or the staged copy
        assert comm.allreduce_algorithm(t) in ("nccl", "nccl_ring", "nccl_tree", "staged")
        assert comm.allreduce_algorithm(torch.empty(1000)) not in ("nccl", "nccl_ring", "nccl_tree", "staged")
    else:
        for call in (lambda: comm.allreduce(t), lambda: comm.bcast(t), lambda: comm.allreduce_group([t]),
                     lambda: comm.allreduce_algorithm(t)):
            with pytest.raises(fr.ArgumentError, match="built without CUDA: rebuild it with CUDA"):
                call()
    host = values(torch.float32, 1000, ME)
    with pytest.raises(fr.ArgumentError, match="sendbuf is on host and recvbuf on cuda:0"):
        comm.allreduce(host, t)
    with pytest.raises(fr.ArgumentError, match="different places"):
        comm.allreduce_group([host, t])
    assert torch.equal(host, values(torch.float32, 1000, ME))


def test_algorithm_query_takes_torch_dtypes(comm):
    for dtype in (torch.float32, torch.bfloat16, torch.int64):
        for n in (1, 1 << 16, 1 << 22):
            assert comm.allreduce_algorithm(n, dtype) == comm.allreduce_algorithm(torch.empty(n, dtype=dtype))
    with pytest.raises(fr.ArgumentError, match="dtype int16 is not one of fastreduce's types"):
        comm.allreduce_algorithm(10, torch.int16)


# --------------------------------------------------------------- DDP hooks

def model(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(12, 64), torch.nn.Tanh(), torch.nn.Linear(64, 32), torch.nn.Tanh(),
                               torch.nn.Linear(32, 3))


def batch(step, rank, n=16):
    g = torch.Generator().manual_seed(1000 * step + rank)
    x = torch.randn(n, 12, generator=g)
    return x, (x[:, :3].sum(1) > 0).long() + (x[:, 3] > 1).long()


def train_ddp(hook, state=None, steps=6, bucket_mb=0.002, device=None):
    """DDP's parameters after @p steps with @p hook (None: DDP's own
    allreduce); on @p device (a GPU, one a rank) or the CPU."""
    gpus = [device.index] if device is not None else None
    m = DDP(model().to(device), device_ids=gpus, bucket_cap_mb=bucket_mb)   # small buckets: several requests a step
    if hook is not None:
        m.register_comm_hook(state, hook)
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    for s in range(steps):
        opt.zero_grad()
        x, y = batch(s, ME)
        torch.nn.functional.cross_entropy(m(x.to(device)), y.to(device)).backward()
        opt.step()
    return [p.detach().cpu().clone() for p in m.module.parameters()]


@pytest.mark.parametrize("hook,theirs,tol", [
    ("allreduce_hook", None, 1e-6),
    ("fp16_compress_hook", "fp16_compress_hook", 2e-3),
    ("bf16_compress_hook", "bf16_compress_hook", 2e-2),
])
def test_ddp_hook_matches_gloo(gloo, comm, hook, theirs, tol):
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    ref = train_ddp(getattr(default_hooks, theirs) if theirs else None)
    got = train_ddp(getattr(frt, hook), comm)
    for a, b in zip(ref, got):
        assert same_on_every_rank(b)
        torch.testing.assert_close(b, a, rtol=tol, atol=tol)


def test_ddp_hook_default_comm(gloo):
    ref = train_ddp(None, steps=2)
    got = train_ddp(frt.allreduce_hook, None, steps=2)
    for a, b in zip(ref, got):
        torch.testing.assert_close(b, a, rtol=1e-6, atol=1e-6)


# ---------------------------------------------------- DistributedOptimizer

def by_hand(make_opt, steps, passes, average_passes, op="avg", before_step=None):
    """Every rank's gradients computed here, averaged (summed with op "sum")
    in float64 and applied by a plain optimizer: the reference.
    @p before_step(params), if any, runs on the reduced gradients."""
    m = model()
    opt = make_opt(m.parameters())
    for s in range(steps):
        opt.zero_grad()
        sums = [torch.zeros_like(p, dtype=torch.float64) for p in m.parameters()]
        for r in range(NP):
            mr = copy.deepcopy(m)
            for k in range(passes):
                x, y = batch(s * passes + k, r)
                torch.nn.functional.cross_entropy(mr(x), y).backward()
            for acc, p in zip(sums, mr.parameters()):
                acc += p.grad.double()
        for p, acc in zip(m.parameters(), sums):
            g = acc / NP if op == "avg" else acc
            p.grad = (g / passes if average_passes else g).float()
        if before_step:
            before_step(m.parameters())
        opt.step()
    return [p.detach() for p in m.parameters()]


def with_fastreduce(comm, make_opt, steps, passes, average_passes, pattern="step", before_step=None, **kw):
    """The parameters after @p steps with a DistributedOptimizer. @p pattern:
    "step", or "synchronize" (synchronize(), before_step(params), step()),
    or "skip_synchronize" (the same with step() in skip_synchronize())."""
    m = model()
    opt = frt.DistributedOptimizer(make_opt(m.parameters()), named_parameters=m.named_parameters(), comm=comm,
                                   backward_passes_per_step=passes, average_aggregated_gradients=average_passes,
                                   **kw)
    assert isinstance(opt, type(make_opt([torch.nn.Parameter(torch.zeros(1))])))
    for s in range(steps):
        opt.zero_grad()
        for k in range(passes):
            x, y = batch(s * passes + k, ME)
            torch.nn.functional.cross_entropy(m(x), y).backward()
        if pattern != "step":
            opt.synchronize()
            if before_step:
                before_step(m.parameters())
        with opt.skip_synchronize() if pattern == "skip_synchronize" else contextlib.nullcontext():
            opt.step()
    return [p.detach() for p in m.parameters()], opt


SGD = lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9)   # noqa: E731
ADAM = lambda ps: torch.optim.Adam(ps, lr=0.01)              # noqa: E731


@pytest.mark.parametrize("fusion", [0, 600, 25 << 20])
@pytest.mark.parametrize("compression,tol", [("none", 1e-5), ("fp16", 3e-3), ("bf16", 3e-2)])
@pytest.mark.parametrize("passes,average", [(1, False), (3, False), (2, True)])
def test_optimizer_matches_hand_averaged(comm, fusion, compression, tol, passes, average):
    # (Adam divides by the gradients' size, which turns a narrow type's
    # rounding of small gradients into large steps: compressed runs use SGD)
    make = ADAM if fusion == 600 and compression == "none" else SGD
    want = by_hand(make, 3, passes, average)
    got, opt = with_fastreduce(comm, make, 3, passes, average, fusion_bytes=fusion,
                               compression=getattr(frt.Compression, compression))
    nparams = len(got)
    assert len(opt._fr_buckets) == (nparams if fusion == 0 else 1 if fusion > 1 << 20 else len(opt._fr_buckets))
    if fusion == 600:
        assert 1 < len(opt._fr_buckets) < nparams
    for a, b in zip(want, got):
        assert same_on_every_rank(b)
        torch.testing.assert_close(b, a, rtol=tol, atol=tol)


def clip(params):
    torch.nn.utils.clip_grad_norm_(list(params), 0.05)


@pytest.mark.parametrize("op", ["sum", "avg"])
@pytest.mark.parametrize("pattern", ["synchronize", "skip_synchronize"])
@pytest.mark.parametrize("passes,average,shared", [(1, False, True), (2, True, False)])
def test_synchronize_then_step_reduces_once(comm, op, pattern, passes, average, shared):
    """Horovod's pattern for clipping: synchronize(), clip the reduced
    gradients, step() (in skip_synchronize() or not); each step's gradients
    are reduced once, as by hand."""
    want = by_hand(SGD, 3, passes, average, op=op, before_step=clip)
    got, _ = with_fastreduce(comm, SGD, 3, passes, average, pattern=pattern, before_step=clip, op=op,
                             shared_buckets=shared, fusion_bytes=600)
    for a, b in zip(want, got):
        assert same_on_every_rank(b)
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-5)


def amp_loss(m, x, y):
    """A loss whose gradients are 100 times its size: a GradScaler's scale
    of 2**126 makes them overflow, one of 2**122 does not."""
    loss = torch.nn.functional.cross_entropy(m(x), y)
    return 100 * loss - 99 * loss.detach()


@pytest.mark.parametrize("skip", [True, False])
def test_grad_scaler_pattern(comm, skip):
    """AMP as docs/python.md says: synchronize(), scaler.unscale_(), clip,
    scaler.step() (in skip_synchronize() or not), scaler.update(). The
    scale starts so large that steps overflow and are skipped, on every rank
    alike; reference: the same scaler on gradients averaged by hand."""
    steps, scaler = 8, lambda: torch.amp.GradScaler("cpu", init_scale=2.0 ** 126, growth_interval=1)
    m, ref = model(), scaler()
    opt = SGD(m.parameters())
    scales = []
    for s in range(steps):
        opt.zero_grad()
        grads = []
        for r in range(NP):
            mr = copy.deepcopy(m)
            ref.scale(amp_loss(mr, *batch(s, r))).backward()
            grads.append([p.grad.double() for p in mr.parameters()])
        for i, p in enumerate(m.parameters()):
            p.grad = (sum(g[i] for g in grads) / NP).float()
        ref.unscale_(opt)
        clip(m.parameters())
        ref.step(opt)
        ref.update()
        scales.append(ref.get_scale())
    assert any(b < a for a, b in zip(scales, scales[1:])) and any(b > a for a, b in zip(scales, scales[1:]))

    md, sc = model(), scaler()
    opt = frt.DistributedOptimizer(SGD(md.parameters()), comm=comm, fusion_bytes=600)
    for s in range(steps):
        opt.zero_grad()
        sc.scale(amp_loss(md, *batch(s, ME))).backward()
        opt.synchronize()
        sc.unscale_(opt)
        clip(md.parameters())
        with opt.skip_synchronize() if skip else contextlib.nullcontext():
            sc.step(opt)
        sc.update()
        assert sc.get_scale() == scales[s]
    for a, b in zip(m.parameters(), md.parameters()):
        assert same_on_every_rank(b)
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-5)


def embedding_model(sparse):
    torch.manual_seed(3)
    return torch.nn.Sequential(torch.nn.Embedding(50, 8, sparse=sparse), torch.nn.Flatten(), torch.nn.Linear(32, 3))


def embedding_batch(step, rank):
    g = torch.Generator().manual_seed(7000 + 100 * step + rank)
    return torch.randint(0, 50, (6, 4), generator=g), torch.randint(0, 3, (6,), generator=g)


@pytest.mark.parametrize("shared", [True, False])
def test_optimizer_sparse_gradients_as_dense(comm, shared):
    """An embedding's sparse gradients are averaged as dense ones: the same
    parameters as the dense layer's gradients averaged by hand."""
    ref = embedding_model(False)
    ref_opt = PLAIN(ref.parameters())
    m = embedding_model(True)
    opt = frt.DistributedOptimizer(PLAIN(m.parameters()), comm=comm, fusion_bytes=0, shared_buckets=shared)
    for s in range(3):
        ref_opt.zero_grad()
        sums = [torch.zeros_like(p, dtype=torch.float64) for p in ref.parameters()]
        for r in range(NP):
            mr = copy.deepcopy(ref)
            torch.nn.functional.cross_entropy(mr(embedding_batch(s, r)[0]), embedding_batch(s, r)[1]).backward()
            for acc, p in zip(sums, mr.parameters()):
                acc += p.grad.double()
        for p, acc in zip(ref.parameters(), sums):
            p.grad = (acc / NP).float()
        ref_opt.step()
        opt.zero_grad()
        torch.nn.functional.cross_entropy(m(embedding_batch(s, ME)[0]), embedding_batch(s, ME)[1]).backward()
        opt.step()
        assert m[0].weight.grad.layout == torch.strided
    for a, b in zip(ref.parameters(), m.parameters()):
        assert same_on_every_rank(b)
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6)


def test_skip_synchronize_refuses_unreduced_gradients(comm):
    m = model()
    opt = frt.DistributedOptimizer(SGD(m.parameters()), comm=comm)
    torch.nn.functional.cross_entropy(m(batch(0, ME)[0]), batch(0, ME)[1]).backward()
    with pytest.raises(fr.FastReduceError, match="call synchronize"):
        with opt.skip_synchronize():
            opt.step()
    opt.step()   # the optimizer is left usable


PLAIN = lambda ps: torch.optim.SGD(ps, lr=0.1)   # noqa: E731 (no state: a new one continues as the old)


def one_step(m, opt, s):
    opt.zero_grad()
    torch.nn.functional.cross_entropy(m(batch(s, ME)[0]), batch(s, ME)[1]).backward()
    opt.step()


def test_optimizer_wrapped_again(comm):
    """New DistributedOptimizers on the same parameters, the old ones still
    referenced, and a DistributedOptimizer wrapped again: each continues
    the training as one optimizer would (by hand); the ones before are
    closed, and a dropped one is collected with its hooks."""
    want = by_hand(PLAIN, 6, 1, False)
    m = model()
    first = frt.DistributedOptimizer(PLAIN(m.parameters()), comm=comm, fusion_bytes=600)
    one_step(m, first, 0)
    second = frt.DistributedOptimizer(PLAIN(m.parameters()), comm=comm, fusion_bytes=600)
    one_step(m, second, 1)
    one_step(m, second, 2)
    third = frt.DistributedOptimizer(second, comm=comm, fusion_bytes=0)   # wrapped again
    one_step(m, third, 3)
    one_step(m, third, 4)
    assert type(third).__mro__[1] is torch.optim.SGD
    for old in (first, second):
        for call in (old.step, old.zero_grad, old.synchronize):
            with pytest.raises(fr.FastReduceError, match="closed: its parameters were wrapped by a newer"):
                call()
    dropped = weakref.ref(third)
    del third
    gc.collect()
    assert dropped() is None
    assert all(not p._post_accumulate_grad_hooks for p in m.parameters())
    last = frt.DistributedOptimizer(PLAIN(m.parameters()), comm=comm)
    one_step(m, last, 5)
    assert all(len(p._post_accumulate_grad_hooks) == 1 for p in m.parameters())
    for a, b in zip(want, m.parameters()):
        assert same_on_every_rank(b)
        torch.testing.assert_close(b.detach(), a, rtol=1e-5, atol=1e-5)
    # not while the one before has gradients to reduce
    torch.nn.functional.cross_entropy(m(batch(6, ME)[0]), batch(6, ME)[1]).backward()
    with pytest.raises(fr.ArgumentError, match="gradients not reduced: call its step"):
        frt.DistributedOptimizer(PLAIN(m.parameters()), comm=comm)
    last.synchronize()


@pytest.mark.parametrize("fusion,compression", [(600, "none"), (25 << 20, "none"), (25 << 20, "fp16")])
def test_optimizer_shared_buckets(comm, fusion, compression):
    """Buckets in shared memory (the default) give the bits of private ones;
    without compression the gradients are views of the shared buffers, kept
    across zero_grad()."""
    kw = dict(fusion_bytes=fusion, compression=getattr(frt.Compression, compression))
    shared, opt = with_fastreduce(comm, SGD, 3, 1, False, **kw)
    private, popt = with_fastreduce(comm, SGD, 3, 1, False, shared_buckets=False, **kw)
    assert all(b.flat is not None and fr.is_shared(b.flat) for b in opt._fr_buckets)
    assert all(b.flat is None for b in popt._fr_buckets)
    for a, b in zip(shared, private):
        assert torch.equal(a, b)
    if compression == "none":
        opt.zero_grad()
        for b in opt._fr_buckets:
            for p, v in zip(b.params, b.views):
                assert p.grad is v and fr.is_shared(p.grad) and not p.grad.any()


@pytest.mark.parametrize("make", ["numpy", "torch"])
def test_shared_memory_allreduce_and_bcast(comm, make):
    """fastreduce.empty and fastreduce.torch.empty: zeros in shared memory;
    an allreduce of them on every rank goes zero-copy with the right sums,
    and so does a bcast from every root."""
    n = 70007   # (7 x 10001)
    a = fr.empty((7, n // 7), "float32") if make == "numpy" else frt.empty((7, n // 7), torch.float32)
    assert a.shape == (7, n // 7) and fr.is_shared(a) and not a.any()
    assert not fr.is_shared(np.zeros(10)) and not fr.is_shared(torch.zeros(10))
    a[:] = (np.arange(n).reshape(7, -1) % 5 + ME) if make == "numpy" else \
        torch.from_numpy((np.arange(n).reshape(7, -1) % 5 + ME).astype(np.float32))
    comm.allreduce(a)
    assert fr.last_zero_copy()
    want = (np.arange(n).reshape(7, -1) % 5) * NP + NP * (NP - 1) / 2
    assert np.array_equal(np.asarray(a), want)
    for root in range(NP):
        b = fr.empty(n, "int32") if make == "numpy" else frt.empty(n, torch.int32)
        if ME == root:
            b[:] = (np.arange(n) * 3 + root) if make == "numpy" else torch.arange(n, dtype=torch.int32) * 3 + root
        comm.bcast(b, root=root)
        assert fr.last_zero_copy()
        assert np.array_equal(np.asarray(b), np.arange(n) * 3 + root)
    assert fr.empty(0).size == 0 and frt.empty((0, 3)).shape == (0, 3)


class Partly(torch.nn.Module):
    """model() and two more layers: `some`, used by rank 0 only, and
    `never`, used by no rank."""

    def __init__(self):
        super().__init__()
        self.body = model()
        self.some = torch.nn.Linear(3, 3)
        self.never = torch.nn.Linear(3, 3)

    def forward(self, x, rank):
        out = self.body(x)
        return self.some(out) if rank == 0 else out


DECAY = lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.1)   # noqa: E731 (moves zero gradients)


@pytest.mark.parametrize("shared,fusion,compression,tol", [
    (True, 25 << 20, "none", 1e-5), (False, 25 << 20, "none", 1e-5), (True, 0, "none", 1e-5), (False, 0, "none", 1e-5),
    (True, 25 << 20, "fp16", 3e-3), (False, 600, "bf16", 3e-2)])
@pytest.mark.parametrize("set_to_none", [True, False])
def test_parameters_without_gradients(comm, shared, fusion, compression, tol, set_to_none):
    """A parameter no rank gave a gradient keeps .grad None and is not
    moved (weight decay, momentum), as by a plain optimizer; one that some
    ranks used is reduced with zeros from the others (as DDP's
    find_unused_parameters). Reference: every rank's gradients by hand,
    None where no rank made one, with the same zero_grad()."""
    torch.manual_seed(0)
    ref = Partly()
    m = copy.deepcopy(ref)
    opt = DECAY(ref.parameters())
    for s in range(3):
        opt.zero_grad(set_to_none=set_to_none)
        grads = {}
        for r in range(NP):
            mr = copy.deepcopy(ref)
            x, y = batch(s, r)
            torch.nn.functional.cross_entropy(mr(x, r), y).backward()
            for name, p in mr.named_parameters():
                if p.grad is not None:
                    grads[name] = grads.get(name, 0) + p.grad.double()
        for name, p in ref.named_parameters():
            if name in grads:
                p.grad = (grads[name] / NP).float()
        opt.step()
    assert ref.never.weight.grad is None

    opt = frt.DistributedOptimizer(DECAY(m.parameters()), comm=comm, shared_buckets=shared, fusion_bytes=fusion,
                                   compression=getattr(frt.Compression, compression))
    never = [t.detach().clone() for t in m.never.parameters()]
    for s in range(3):
        opt.zero_grad(set_to_none=set_to_none)
        x, y = batch(s, ME)
        torch.nn.functional.cross_entropy(m(x, ME), y).backward()
        opt.step()
        assert m.never.weight.grad is None and m.never.bias.grad is None
        assert m.some.weight.grad is not None
    for a, b in zip(never, m.never.parameters()):
        assert torch.equal(a, b.detach())
    for (name, a), b in zip(ref.named_parameters(), m.parameters()):
        assert same_on_every_rank(b), name
        torch.testing.assert_close(b.detach(), a.detach(), rtol=tol, atol=tol, msg=name)


def changing(s, m, opt):
    """Before step @p s (-1: before the optimizer is made): which layers of
    m (model() and a Linear(3, 3)) train. m[0][0] is frozen at first and
    unfrozen at step 2; m[1] comes in a param group of its own at step 3;
    m[0][2] is frozen at step 4."""
    if s == -1:
        m[0][0].requires_grad_(False)
        m[1].requires_grad_(False)
    elif s == 2:
        m[0][0].requires_grad_(True)
    elif s == 3:
        m[1].requires_grad_(True)
        opt.add_param_group({"params": list(m[1].parameters())})
    elif s == 4:
        m[0][2].requires_grad_(False)


@pytest.mark.parametrize("shared,fusion", [(True, 600), (False, 600), (True, 25 << 20), (False, 0)])
def test_parameters_frozen_and_unfrozen(comm, shared, fusion):
    """Parameters that start or stop requiring gradients after the
    optimizer is made, and a param group added: each step reduces the
    gradients that exist, as by hand (None where none), and moves nothing
    frozen; the ranks stay identical."""
    torch.manual_seed(0)
    ref = torch.nn.Sequential(model(), torch.nn.Linear(3, 3))
    m = copy.deepcopy(ref)
    changing(-1, ref, None)
    opt = DECAY(ref[0].parameters())
    for s in range(6):
        changing(s, ref, opt)
        opt.zero_grad()
        grads = {}
        for r in range(NP):
            mr = copy.deepcopy(ref)
            torch.nn.functional.cross_entropy(mr(batch(s, r)[0]), batch(s, r)[1]).backward()
            for name, p in mr.named_parameters():
                if p.grad is not None:
                    grads[name] = grads.get(name, 0) + p.grad.double()
        for name, p in ref.named_parameters():
            p.grad = (grads[name] / NP).float() if name in grads else None
        opt.step()

    changing(-1, m, None)
    opt = frt.DistributedOptimizer(DECAY(m[0].parameters()), comm=comm, shared_buckets=shared, fusion_bytes=fusion)
    for s in range(6):
        changing(s, m, opt)
        frozen = [p.detach().clone() for p in m.parameters() if not p.requires_grad]
        opt.zero_grad()
        torch.nn.functional.cross_entropy(m(batch(s, ME)[0]), batch(s, ME)[1]).backward()
        opt.step()
        assert all(torch.equal(a, p.detach()) for a, p in zip(frozen, (p for p in m.parameters()
                                                                       if not p.requires_grad)))
    for (name, a), b in zip(ref.named_parameters(), m.parameters()):
        assert same_on_every_rank(b), name
        torch.testing.assert_close(b.detach(), a.detach(), rtol=1e-5, atol=1e-5, msg=name)


@pytest.mark.parametrize("shared", [True, False])
def test_step_with_a_closure(comm, shared):
    """LBFGS, whose step() calls the closure (zero_grad, backward) several
    times and reads the gradients after each: reduced after each call, the
    steps are those of LBFGS on the loss averaged over the ranks by hand."""
    def lbfgs(ps):
        return torch.optim.LBFGS(ps, lr=0.5, max_iter=4, history_size=3)
    ref = model()
    opt = lbfgs(ref.parameters())

    def every_rank():
        opt.zero_grad()
        loss = sum(torch.nn.functional.cross_entropy(ref(batch(0, r)[0]), batch(0, r)[1]) for r in range(NP)) / NP
        loss.backward()
        return loss
    for _ in range(3):
        opt.step(every_rank)

    m = model()
    dopt = frt.DistributedOptimizer(lbfgs(m.parameters()), comm=comm, shared_buckets=shared, fusion_bytes=600)
    calls = []

    def mine():
        dopt.zero_grad()
        loss = torch.nn.functional.cross_entropy(m(batch(0, ME)[0]), batch(0, ME)[1])
        loss.backward()
        calls.append(1)
        # (the loss LBFGS decides on must be the same on every rank too)
        return comm.allreduce(loss.detach().clone(), op="avg")
    for _ in range(3):
        dopt.step(mine)
    assert len(calls) > 3
    for a, b in zip(ref.parameters(), m.parameters()):
        assert same_on_every_rank(b)
        torch.testing.assert_close(b.detach(), a.detach(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shared", [True, False])
def test_step_again_without_a_new_gradient(comm, shared):
    """step() twice on one backward (op SUM): the second applies the sum
    again, as a plain optimizer would, rather than summing the sum."""
    m = model()
    start = [p.detach().clone() for p in m.parameters()]
    sums = [0] * len(start)
    for r in range(NP):
        mr = copy.deepcopy(m)
        torch.nn.functional.cross_entropy(mr(batch(0, r)[0]), batch(0, r)[1]).backward()
        sums = [a + p.grad.double() for a, p in zip(sums, mr.parameters())]
    opt = frt.DistributedOptimizer(PLAIN(m.parameters()), comm=comm, op=fr.SUM, shared_buckets=shared)
    torch.nn.functional.cross_entropy(m(batch(0, ME)[0]), batch(0, ME)[1]).backward()
    opt.step()
    opt.step()
    for p0, g, p in zip(start, sums, m.parameters()):
        torch.testing.assert_close(p.detach(), p0 - 2 * 0.1 * g.float(), rtol=1e-5, atol=1e-5)


def test_optimizer_unused_parameter_and_misuse(comm):
    m = model()
    extra = torch.nn.Parameter(torch.ones(4))   # never gets a gradient
    opt = frt.DistributedOptimizer(torch.optim.SGD(list(m.parameters()) + [extra], lr=0.1), comm=comm,
                                   fusion_bytes=0)
    x, y = batch(0, ME)
    torch.nn.functional.cross_entropy(m(x), y).backward()
    with pytest.raises(fr.FastReduceError, match="zero_grad"):
        opt.zero_grad()
    opt.step()
    assert torch.equal(extra.detach(), torch.ones(4)) and extra.grad is None   # no gradient on any rank
    last = m[4].bias.detach().clone()
    opt.zero_grad()
    torch.nn.functional.cross_entropy(m(x), y).backward()
    m[4].bias.grad = None   # dropped after backward, on every rank: no gradient
    opt.step()
    assert m[4].bias.grad is None and torch.equal(m[4].bias.detach(), last)
    torch.nn.functional.cross_entropy(m(x), y).backward()
    with pytest.raises(fr.FastReduceError, match="2 times before step"):
        torch.nn.functional.cross_entropy(m(x), y).backward()
    opt.synchronize()
    with pytest.raises(fr.ArgumentError, match="named_parameters lacks"):
        frt.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.1), named_parameters=[])


# -------------------------------------------------------------- broadcasts

def test_broadcast_parameters_and_optimizer_state(comm):
    for root in range(NP):
        m = model(seed=ME)   # different on every rank
        m.register_buffer("flag", torch.tensor([ME % 2 == 0]))   # a bool buffer: bytes are broadcast
        opt = torch.optim.Adam(m.parameters(), lr=0.01 * (ME + 1))
        x, y = batch(ME, ME)
        torch.nn.functional.cross_entropy(m(x), y).backward()
        opt.step()   # state (exp_avg, step) differs on every rank
        # root's state, sent by mpi4py's pickling: the reference
        want = W.bcast(copy.deepcopy(m.state_dict()) if ME == root else None, root=root)
        want_opt = W.bcast(copy.deepcopy(opt.state_dict()) if ME == root else None, root=root)
        frt.broadcast_parameters(m.state_dict(), root_rank=root, comm=comm)
        frt.broadcast_optimizer_state(opt, root_rank=root, comm=comm)
        for name, t in m.state_dict().items():
            assert torch.equal(t, want[name]), name
        got_opt = opt.state_dict()
        assert got_opt["param_groups"] == want_opt["param_groups"]
        for k, v in want_opt["state"].items():
            for field, t in v.items():
                assert torch.equal(torch.as_tensor(got_opt["state"][k][field]), torch.as_tensor(t)), (k, field)
    assert frt.broadcast_object({"a": [1, 2]} if ME == 0 else None, 0, comm) == {"a": [1, 2]}
