"""fastreduce for PyTorch trainers: DDP communication hooks, a Horovod-style
DistributedOptimizer, and broadcasts of parameters and optimizer state.

    import fastreduce.torch as frt

    ddp = DistributedDataParallel(model)                 # gloo or NCCL group
    ddp.register_comm_hook(frt.default_comm(), frt.allreduce_hook)

    opt = frt.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters())
    frt.broadcast_parameters(model.state_dict(), root_rank=0)
    frt.broadcast_optimizer_state(opt, root_rank=0)

Every function takes a fastreduce.Comm (`comm`, or the hook's state);
None means default_comm(), one over MPI.COMM_WORLD.
"""
import io
import queue
import socket
import threading

import numpy as np
import torch

import fastreduce as _fr
from fastreduce import AVG, SUM

__all__ = ["default_comm", "init_process_group", "allreduce_hook", "fp16_compress_hook", "bf16_compress_hook", "future_of",
           "DistributedOptimizer", "Compression", "broadcast_parameters", "broadcast_optimizer_state",
           "broadcast_object", "empty"]

_default = None


def default_comm():
    """A communicator over MPI.COMM_WORLD, made at the first call (collective)."""
    global _default
    if _default is None:
        _default = _fr.Comm()
    return _default


def _comm(comm):
    return default_comm() if comm is None else comm


def init_process_group(backend="gloo", comm=None, **kw):
    """torch.distributed's default group over the ranks of @p comm's MPI
    communicator, same ranks and size, for DDP and other torch.distributed
    users: rank 0 picks a free TCP port on 127.0.0.1, or on MASTER_ADDR where
    set, and MPI tells the others (collective)."""
    import os
    import torch.distributed as dist
    mpi = _comm(comm).mpi_comm
    addr = os.environ.get("MASTER_ADDR", "127.0.0.1")
    port = None
    if mpi.Get_rank() == 0:
        with socket.socket() as s:
            s.bind((addr, 0))
            port = s.getsockname()[1]
    port = mpi.bcast(port, root=0)
    dist.init_process_group(backend, init_method="tcp://%s:%d" % (addr, port), rank=mpi.Get_rank(),
                            world_size=mpi.Get_size(), **kw)


# ------------------------------------------------------------------ futures

class _Completer:
    """One thread that completes torch futures from fastreduce Works, in the
    order they were started (the order a communicator runs them). It waits
    inside the library with the GIL released, so Python goes on meanwhile."""

    def __init__(self):
        self._q = queue.Queue()
        self._thread = None
        self._lock = threading.Lock()

    def add(self, work, fut, then):
        with self._lock:
            if self._thread is None:
                from mpi4py import MPI
                if MPI.Query_thread() != MPI.THREAD_MULTIPLE:
                    raise _fr.FastReduceError(7, "fastreduce.torch completes futures on a thread of its own, which "
                                                 "needs MPI initialised with MPI_THREAD_MULTIPLE (mpi4py's default)")
                self._thread = threading.Thread(target=self._run, name="fastreduce-futures", daemon=True)
                self._thread.start()
        self._q.put((work, fut, then))

    def _run(self):
        while True:
            work, fut, then = self._q.get()
            try:
                work.wait()
                fut.set_result(then())
            except Exception as e:   # the future carries it to whoever waits
                fut.set_exception(e)


_completer = _Completer()


def future_of(work, then=None):
    """A torch.futures.Future completed when @p work (a host fastreduce.Work)
    completes, with then()'s value (default: the work's result)."""
    fut = torch.futures.Future()
    _completer.add(work, fut, then or work.result)
    return fut


def _done_on_stream(tensor):
    """A future for work already queued on @p tensor's current stream: it
    completes at once, and CUDA-aware futures make their users' streams
    wait for that stream."""
    fut = torch.futures.Future(devices=[tensor.device])
    fut.set_result(tensor)
    return fut


# ---------------------------------------------------------------- DDP hooks

def allreduce_hook(state, bucket):
    """DDP communication hook: average the bucket over the ranks with
    fastreduce. Register with ddp.register_comm_hook(comm_or_None, allreduce_hook).
    Host buckets are reduced by a non-blocking request while backward goes
    on; CUDA buckets on the current stream. DDP(..., gradient_as_bucket_view=True)
    spares DDP a copy of each reduced bucket into the gradients."""
    comm = _comm(state)
    buf = bucket.buffer()
    work = comm.allreduce(buf, op=AVG, async_op=True)
    if buf.is_cuda:
        return _done_on_stream(buf)
    return future_of(work, lambda: buf)


def _compress_hook(wire_dtype):
    def hook(state, bucket):
        comm = _comm(state)
        buf = bucket.buffer()
        # divided before the sum, as PyTorch's fp16_compress_hook does, so that
        # the sum of large gradients stays in the narrow type's range
        wire = buf.to(wire_dtype).div_(comm.size)
        work = comm.allreduce(wire, op=SUM, async_op=True)

        def back():
            buf.copy_(wire)
            return buf
        if buf.is_cuda:
            return _done_on_stream(back())
        return future_of(work, back)
    return hook


fp16_compress_hook = _compress_hook(torch.float16)
fp16_compress_hook.__doc__ = """As allreduce_hook, with the bucket sent as float16 (half the bytes)."""
bf16_compress_hook = _compress_hook(torch.bfloat16)
bf16_compress_hook.__doc__ = """As allreduce_hook, with the bucket sent as bfloat16."""


# --------------------------------------------------------------- broadcasts

def _bcast_tensor(comm, t, root_rank):
    """Start a broadcast of @p t's bytes (any dtype: a broadcast copies bits)."""
    if not t.is_contiguous():   # (then the flat view below would be a copy)
        raise _fr.ArgumentError(1, "broadcast: a tensor that is not contiguous; make it so first")
    return comm.bcast(t.detach().reshape(-1).view(torch.uint8), root=root_rank, async_op=True)


def broadcast_parameters(params, root_rank=0, comm=None):
    """Broadcast tensors from root_rank, in place: a state_dict, a
    named_parameters() iterator, or an iterable of tensors."""
    comm = _comm(comm)
    items = params.items() if hasattr(params, "items") else params
    tensors = [p[1] if isinstance(p, tuple) else p for p in items]
    works = [_bcast_tensor(comm, t, root_rank) for t in tensors if isinstance(t, torch.Tensor)]
    for w in works:
        w.wait()


def broadcast_object(obj, root_rank=0, comm=None):
    """root_rank's @p obj on every rank (torch.save's pickling: tensors, dicts,
    lists, numbers); returns it."""
    comm = _comm(comm)
    data = b""
    if comm.rank == root_rank:
        f = io.BytesIO()
        torch.save(obj, f)
        data = f.getvalue()
    n = np.array([len(data)], np.int64)
    comm.bcast(n, root=root_rank)
    buf = np.frombuffer(data, np.uint8).copy() if comm.rank == root_rank else np.empty(int(n[0]), np.uint8)
    comm.bcast(buf, root=root_rank)
    if comm.rank == root_rank:
        return obj
    return torch.load(io.BytesIO(buf.tobytes()), map_location="cpu", weights_only=False)


def broadcast_optimizer_state(optimizer, root_rank=0, comm=None):
    """Make every rank's optimizer state (its state tensors, step counts and
    hyper-parameters) root_rank's."""
    state = broadcast_object(optimizer.state_dict(), root_rank, comm)
    if _comm(comm).rank != root_rank:
        optimizer.load_state_dict(state)


def empty(shape, dtype=torch.float32):
    """A CPU tensor of @p shape and @p dtype in memory the node's ranks share
    (fastreduce.shared_buffer): allreduces of such tensors on every rank
    (bcasts of the root's) go zero-copy. Its contents are zeros."""
    shape, n = _fr._shared.count_of(shape)
    if n == 0:
        return torch.empty(shape, dtype=dtype)
    nbytes = n * torch.empty((), dtype=dtype).element_size()
    return torch.frombuffer(_fr.shared_buffer(nbytes), dtype=dtype, count=n).reshape(shape)


# (after the rest: the optimizer uses _comm and empty above)
from fastreduce._optimizer import Compression, DistributedOptimizer  # noqa: E402
