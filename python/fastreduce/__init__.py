"""fastreduce: allreduce and broadcast of torch tensors (CPU and CUDA), NumPy
arrays and any writable buffer through libfastreduce, on communicators made
from mpi4py's MPI.Comm; blocking or asynchronous (async_op=True returns a
Work, as torch.distributed does).

    from mpi4py import MPI
    import numpy as np, fastreduce as fr

    comm = fr.Comm(MPI.COMM_WORLD)
    grads = np.ones(1000, dtype=np.float32)
    comm.allreduce(grads, op="avg")        # in place
    out = np.empty_like(grads)
    comm.allreduce(grads, out)             # sum into out
    work = comm.allreduce(tensor, op="avg", async_op=True)
    ...                                    # compute while it runs
    work.wait()
    comm.bcast(params, root=0)

fastreduce.torch has a DDP communication hook and a Horovod-style
DistributedOptimizer. The library is found as fastreduce._lib says
(FASTREDUCE_LIB, pkg-config, the system's path). ctypes only: no compiled
extension; the GIL is released while the library works.
"""
import atexit
import ctypes
import itertools
import numbers
import sys
import threading
import weakref

from . import _buffers, _shared
from ._lib import find_library, load

__all__ = ["Comm", "Work", "FastReduceError", "ArgumentError", "SUM", "PROD", "MIN", "MAX", "AVG", "version",
           "cuda_support", "find_library", "empty", "shared_buffer", "is_shared", "last_zero_copy",
           "span"]

# fr_status_t values (include/fastreduce.h)
_STATUS = ["FR_SUCCESS", "FR_ERR_INVALID_ARG", "FR_ERR_NULL_POINTER", "FR_ERR_COUNT", "FR_ERR_ROOT",
           "FR_ERR_UNSUPPORTED_OP", "FR_ERR_BAD_COMM", "FR_ERR_NOT_SUPPORTED", "FR_ERR_NO_MEMORY", "FR_ERR_MPI",
           "FR_ERR_UCX", "FR_ERR_SYSTEM", "FR_ERR_NOT_INITIALIZED", "FR_ERR_CONFIG", "FR_ERR_MISMATCH",
           "FR_ERR_TIMED_OUT", "FR_ERR_INTERNAL", "FR_ERR_CUDA", "FR_ERR_PENDING"]
_ARG_ERRORS = {1, 2, 3, 4, 5}   # the caller's arguments: ArgumentError (a ValueError)
_NOT_SUPPORTED = 7
_IN_PLACE = 1   # FR_IN_PLACE
SUM, PROD, MIN, MAX, AVG = "sum", "prod", "min", "max", "avg"
_OPS = {SUM: 0, PROD: 1, MIN: 2, MAX: 3, AVG: 4}


class FastReduceError(RuntimeError):
    """A call failed; .status is the fr_status_t name, .detail the library's message."""

    def __init__(self, status, detail):
        self.status = _STATUS[status] if 0 <= status < len(_STATUS) else "FR_ERR_%d" % status
        self.detail = detail
        super().__init__("%s: %s" % (self.status, detail))


class ArgumentError(FastReduceError, ValueError):
    """The arguments were refused (bad buffer, type, device, op, root or count)."""


_lib = load()


def version():
    return _lib.fr_version().decode()


def cuda_support():
    """Whether the loaded library serves CUDA tensors (built with CUDA)."""
    return bool(_lib.fr_cuda_support())


def _error(status):
    """The exception for a failed call's @p status, with this thread's detail."""
    detail = (_lib.fr_last_error() or b"").decode(errors="replace")
    return (ArgumentError if status in _ARG_ERRORS else FastReduceError)(status, detail)


def _check(status):
    if status != 0:
        raise _error(status)


def shared_buffer(nbytes):
    """A writable buffer of @p nbytes (a ctypes array) in memory the node's
    ranks share (fr_mem_alloc), for numpy.frombuffer, torch.frombuffer or
    memoryview; freed when nothing made over it is left."""
    return _shared.buffer(_lib, nbytes, _error)


def empty(shape, dtype="float32"):
    """A NumPy array of @p shape and @p dtype in memory the node's ranks
    share: allreduces of such arrays on every rank (bcasts of the root's)
    go zero-copy. Its contents are zeros."""
    import numpy
    shape, n = _shared.count_of(shape)
    dt = numpy.dtype(dtype)
    return numpy.frombuffer(shared_buffer(n * dt.itemsize), dtype=dt, count=n).reshape(shape)


def is_shared(obj):
    """Whether @p obj (a tensor, an array, a buffer) lies in memory of
    fr_mem_alloc, as a zero-copy call needs on every rank."""
    b = _buf(obj, False, "is_shared")
    return b.cuda is None and b.nbytes > 0 and bool(_lib.fr_mem_shared(ctypes.c_void_p(b.addr), b.nbytes))


def last_zero_copy():
    """Whether this thread's last blocking collective went zero-copy."""
    return bool(_lib.fr_last_zero_copy())


class span:
    """A span of the program's own work in the timeline (FASTREDUCE_TIMELINE):
    ``with fastreduce.span("compute"): ...``; nothing without the timeline."""

    def __init__(self, name):
        self.name = str(name).encode("utf-8", "replace")

    def __enter__(self):
        _lib.fr_span_begin(self.name)
        return self

    def __exit__(self, *exc):
        _lib.fr_span_end()
        return False


def _buf(obj, writable, what, addr=True):
    try:
        return _buffers.of(obj, writable, what, addr)
    except _buffers.Refused as e:
        raise ArgumentError(e.status, str(e)) from None


class Work:
    """A started collective, as torch.distributed's Work: wait() completes
    it (raising its error, if it failed) and is_completed() asks without
    waiting. On host memory it is the library's request; on a CUDA tensor
    the work is on the tensor's current stream, wait() makes the caller's
    current stream wait for it (the host does not block) and
    is_completed() asks its CUDA event. Until it completes, the buffers
    belong to the library: do not touch them. A host Work dropped unfinished
    is waited for then; one still pending at exit, at exit."""

    def __init__(self, result, req=None, event=None, device=None, keep=()):
        self._result, self._event, self._device, self._keep = result, event, device, keep
        self._req = ctypes.c_uint64(req or 0)
        self._done = req is None
        self._error = None
        self._lock = threading.Lock()
        self._seq = None
        if req is not None:
            with _pending_lock:
                self._seq = next(_started)
                _pending[self._seq] = weakref.ref(self)

    def _finish(self, status):
        self._done = True
        self._keep = ()
        with _pending_lock:
            _pending.pop(self._seq, None)
        if status != 0:
            self._error = _error(status)

    def _complete(self):
        """Wait for the request unless done (another thread may be at it)."""
        with self._lock:
            if not self._done:
                self._finish(_lib.fr_wait(ctypes.byref(self._req)))

    def is_completed(self):
        if self._event is not None:
            return self._event.query()
        if not self._lock.acquire(blocking=False):
            return False   # another thread is waiting for it
        try:
            if not self._done:
                done = ctypes.c_int(0)
                st = _lib.fr_test(ctypes.byref(self._req), ctypes.byref(done))
                if done.value:
                    self._finish(st)
            return self._done
        finally:
            self._lock.release()

    def wait(self):
        """Complete the work; returns True, or raises the collective's error."""
        if self._event is not None:
            import torch
            self._event.wait(torch.cuda.current_stream(self._device))
            return True
        self._complete()
        if self._error is not None:
            raise self._error
        return True

    def result(self):
        """The output (the tensor or array written), after wait()."""
        self.wait()
        return self._result

    def __del__(self):
        # The buffers must outlive the library's use of them, so dropping
        # an unfinished request waits for it.
        try:
            if not self._done and _lib is not None:
                self._complete()
        except Exception:
            pass


# The library's requests not completed yet, by start number: weak, so that a
# dropped Work still completes in its __del__; what is left at exit is waited
# for there.
_pending, _pending_lock, _started = {}, threading.Lock(), itertools.count()


def _wait_at_exit():
    """Complete the Works still pending when the interpreter exits, in the
    order they were started. A request left running would go on using its
    buffers while the process tears down (shared ones included) and would
    leave the other ranks waiting for this one's part; completing it is what
    the ranks that did wait see. The wait is as long as any other: a rank
    that never starts the collective makes it last, up to FASTREDUCE_TIMEOUT
    where set, so it is said first on stderr."""
    with _pending_lock:
        works = [ref() for _, ref in sorted(_pending.items())]
    works = [w for w in works if w is not None and not w._done]
    if not works:
        return
    who = ""
    mpi = sys.modules.get("mpi4py.MPI")
    try:
        if mpi is not None and mpi.Is_initialized() and not mpi.Is_finalized():
            who = " (rank %d of MPI.COMM_WORLD)" % mpi.COMM_WORLD.Get_rank()
    except Exception:
        pass
    sys.stderr.write("fastreduce%s: waiting at exit for %d collective(s) started and not waited for, until every "
                     "rank has taken part (or FASTREDUCE_TIMEOUT passes)\n" % (who, len(works)))
    sys.stderr.flush()
    for w in works:
        w._complete()
        if w._error is not None:
            sys.stderr.write("fastreduce%s: at exit: %s\n" % (who, w._error))


atexit.register(_wait_at_exit)


class Comm:
    """A fastreduce communicator over the ranks of an mpi4py communicator (collective).

    Every call takes torch tensors, NumPy arrays or buffer-protocol objects;
    with async_op=True it returns a Work at once. Calls on one communicator
    run in the order they are made, which every rank must keep. A CUDA
    tensor is served on its device and torch.cuda.current_stream(), after
    the kernels queued there; one GPU per rank and communicator."""

    def __init__(self, mpi_comm=None):
        from mpi4py import MPI
        if mpi_comm is None:
            mpi_comm = MPI.COMM_WORLD
        if not isinstance(mpi_comm, MPI.Comm):
            raise ArgumentError(1, "Comm() takes an mpi4py MPI.Comm, not a %s" % type(mpi_comm).__name__)
        handle = MPI._handleof(mpi_comm)
        ctype = ctypes.c_void_p if MPI._sizeof(MPI.Comm) == ctypes.sizeof(ctypes.c_void_p) else ctypes.c_int
        self._h = ctypes.c_void_p()
        self._gpu = None   # the device of this communicator's CUDA tensors
        create = _lib.fr_comm_create
        create.argtypes = [ctype, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]
        _check(create(handle, None, ctypes.byref(self._h)))
        self.mpi_comm = mpi_comm

    @property
    def size(self):
        return _lib.fr_comm_size(self._live())

    @property
    def rank(self):
        return _lib.fr_comm_rank(self._live())

    def _live(self):
        if not self._h:
            raise FastReduceError(6, "the communicator was freed")
        return self._h

    def _gpu_of(self, b, what):
        """The CUDA stream to serve @p b on, after checking that it can be."""
        if not cuda_support():
            raise ArgumentError(1, "%s is a CUDA tensor, but this libfastreduce (%s) was built without CUDA: "
                                "rebuild it with CUDA (configure --with-cuda=DIR) or pass a CPU tensor (.cpu())" %
                                (what, find_library()))
        if self._gpu is not None and b.cuda != self._gpu:
            raise ArgumentError(1, "%s is on cuda:%d, but this communicator's CUDA tensors are on cuda:%d (one GPU "
                                "per rank): move it there with .to('cuda:%d')" % (what, b.cuda, self._gpu, self._gpu))
        self._gpu = b.cuda
        import torch
        return torch.cuda.current_stream(b.cuda)

    def _device_done(self, result, stream, b, async_op):
        if not async_op:
            return result
        import torch
        ev = torch.cuda.Event()
        ev.record(stream)
        return Work(result, event=ev, device=b.cuda)

    @staticmethod
    def _op(op):
        if not isinstance(op, str) or op not in _OPS:   # (a list is not hashable: no lookup)
            raise ArgumentError(1, "op %r is not one of %s" % (op, ", ".join(_OPS)))
        return _OPS[op]

    def allreduce(self, sendbuf, recvbuf=None, op=SUM, async_op=False):
        """Reduce sendbuf over the ranks into recvbuf (into sendbuf itself
        when recvbuf is None). Returns the output, or a Work with async_op."""
        code = self._op(op)
        if recvbuf is None:
            s = r = _buf(sendbuf, True, "buf")
            out = sendbuf
        else:
            r = _buf(recvbuf, True, "recvbuf")
            s = _buf(sendbuf, False, "sendbuf")
            if (s.dtype, s.count) != (r.dtype, r.count):
                raise ArgumentError(1, "sendbuf and recvbuf differ in type or length (%d %s and %d %s elements)" %
                                    (s.count, _buffers.NAMES[s.dtype], r.count, _buffers.NAMES[r.dtype]))
            if s.cuda != r.cuda:
                raise ArgumentError(1, "sendbuf is on %s and recvbuf on %s: pass both on one device" %
                                    (s.where, r.where))
            out = recvbuf
        src = _IN_PLACE if s is r else s.addr
        if r.cuda is not None:
            stream = self._gpu_of(r, "recvbuf" if s is not r else "buf")
            _check(_lib.fr_allreduce_stream(src, r.addr, r.count, r.dtype, code, self._live(), stream.cuda_stream))
            return self._device_done(out, stream, r, async_op)
        if not async_op:
            _check(_lib.fr_allreduce(src, r.addr, r.count, r.dtype, code, self._live()))
            return out
        req = ctypes.c_uint64(0)
        _check(_lib.fr_iallreduce(src, r.addr, r.count, r.dtype, code, self._live(), ctypes.byref(req)))
        return Work(out, req.value, keep=(s, r))

    def bcast(self, buf, root=0, async_op=False):
        """Broadcast buf from root, in place. Returns buf, or a Work with async_op."""
        if not isinstance(root, int) or isinstance(root, bool):
            raise ArgumentError(4, "root must be an int, not %s" % type(root).__name__)
        b = _buf(buf, True, "buf")
        if b.cuda is not None:
            stream = self._gpu_of(b, "buf")
            _check(_lib.fr_bcast_stream(b.addr, b.count, b.dtype, root, self._live(), stream.cuda_stream))
            return self._device_done(buf, stream, b, async_op)
        if not async_op:
            _check(_lib.fr_bcast(b.addr, b.count, b.dtype, root, self._live()))
            return buf
        req = ctypes.c_uint64(0)
        _check(_lib.fr_ibcast(b.addr, b.count, b.dtype, root, self._live(), ctypes.byref(req)))
        return Work(buf, req.value, keep=(b,))

    def allreduce_group(self, bufs, op=SUM, async_op=False):
        """Reduce every buffer of the list in place, fused by the library
        into few messages (FASTREDUCE_FUSION_BYTES); one element type and
        one place for all. Returns the list, or a Work with async_op."""
        code = self._op(op)
        bufs = list(bufs)
        bs = [_buf(x, True, "bufs[%d]" % i) for i, x in enumerate(bufs)]
        if not bs:
            return Work(bufs) if async_op else bufs
        try:
            _buffers.same_kind(bs, "the buffers")
        except _buffers.Refused as e:
            raise ArgumentError(e.status, str(e)) from None
        if bs[0].cuda is not None:
            # (one call per buffer, on the current stream, as the library
            # serves a device group)
            stream = self._gpu_of(bs[0], "bufs[0]")
            for b in bs:
                _check(_lib.fr_allreduce_stream(_IN_PLACE, b.addr, b.count, b.dtype, code, self._live(),
                                                stream.cuda_stream))
            return self._device_done(bufs, stream, bs[0], async_op)
        n = len(bs)
        ptrs = (ctypes.c_void_p * n)(*[b.addr for b in bs])
        counts = (ctypes.c_size_t * n)(*[b.count for b in bs])
        if not async_op:
            _check(_lib.fr_allreduce_group(None, ptrs, counts, n, bs[0].dtype, code, self._live()))
            return bufs
        req = ctypes.c_uint64(0)
        _check(_lib.fr_iallreduce_group(None, ptrs, counts, n, bs[0].dtype, code, self._live(), ctypes.byref(req)))
        return Work(bufs, req.value, keep=bs)

    def allreduce_algorithm(self, count, dtype="float32", op=SUM):
        """The algorithm fastreduce would use for an allreduce of @p count
        elements of @p dtype (a name, a NumPy dtype or a torch dtype);
        @p count may be a tensor or array, whose size, type and place (host
        or CUDA) are then asked about. ArgumentError for a negative or
        too large count, a type or op fastreduce lacks."""
        if isinstance(count, numbers.Integral) and not isinstance(count, bool):
            code, n = self._op(op), int(count)
            try:
                dt = _buffers.dtype_code(dtype, "dtype")
            except _buffers.Refused as e:
                raise ArgumentError(e.status, str(e)) from None
            # (checked here: size_t would take -1 as 2**64 - 1)
            if n < 0 or n > sys.maxsize:
                raise ArgumentError(3, "count %d is not an element count (0 to %d)" % (n, sys.maxsize))
            a = _lib.fr_allreduce_algorithm(self._live(), n, dt, code)
            if not a:
                raise ArgumentError(3, "count %d of %s is more than the library takes (PTRDIFF_MAX bytes)" %
                                    (n, _buffers.NAMES[dt]))
        else:
            b = _buf(count, False, "count", addr=False)
            if b.cuda is not None and not cuda_support():
                self._gpu_of(b, "buf")   # (refuses it, saying why)
            ask = _lib.fr_allreduce_algorithm_device if b.cuda is not None else _lib.fr_allreduce_algorithm
            a = ask(self._live(), b.count, b.dtype, self._op(op))
        return a.decode() if a else None

    def free(self):
        """Collective: destroy the communicator, on every rank at the same
        point of its calls. Nothing else destroys it (not garbage collection:
        each rank's collector runs at its own moment, and a collective there
        could hang); one never freed goes with the process."""
        if self._h:
            h, self._h = self._h, ctypes.c_void_p()
            _check(_lib.fr_comm_destroy(h))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.free()
