"""fastreduce: allreduce and broadcast of NumPy arrays (and any writable
buffer) through libfastreduce, on communicators made from mpi4py's MPI.Comm.

    from mpi4py import MPI
    import numpy as np, fastreduce as fr

    comm = fr.Comm(MPI.COMM_WORLD)
    grads = np.ones(1000, dtype=np.float32)
    comm.allreduce(grads, op="avg")        # in place
    out = np.empty_like(grads)
    comm.allreduce(grads, out)             # sum into out
    comm.bcast(params, root=0)

The library is found through FASTREDUCE_LIB (a path to libfastreduce.so),
else the system's library path. It must be the build made with the MPI
mpi4py was built with. ctypes only: no compiled extension.
"""
import ctypes
import ctypes.util
import os

__all__ = ["Comm", "FastReduceError", "ArgumentError", "SUM", "PROD", "MIN", "MAX", "AVG", "version"]

# fr_status_t values (include/fastreduce.h)
_STATUS = ["FR_SUCCESS", "FR_ERR_INVALID_ARG", "FR_ERR_NULL_POINTER", "FR_ERR_COUNT", "FR_ERR_ROOT",
           "FR_ERR_UNSUPPORTED_OP", "FR_ERR_BAD_COMM", "FR_ERR_NOT_SUPPORTED", "FR_ERR_NO_MEMORY", "FR_ERR_MPI",
           "FR_ERR_UCX", "FR_ERR_SYSTEM", "FR_ERR_NOT_INITIALIZED", "FR_ERR_CONFIG", "FR_ERR_MISMATCH",
           "FR_ERR_TIMED_OUT", "FR_ERR_INTERNAL", "FR_ERR_CUDA", "FR_ERR_PENDING"]
_ARG_ERRORS = {1, 2, 3, 4, 5}
_IN_PLACE = 1   # FR_IN_PLACE   # the caller's arguments: ArgumentError (a ValueError)

# fr_dtype_t, by NumPy dtype name / buffer-protocol format
_DTYPES = {"int8": 0, "uint8": 1, "int32": 2, "uint32": 3, "int64": 4, "uint64": 5, "float16": 6, "bfloat16": 7,
           "float32": 8, "float64": 9}
_FORMATS = {"b": "int8", "B": "uint8", "i": "int32", "I": "uint32", "q": "int64", "Q": "uint64", "e": "float16",
            "f": "float32", "d": "float64"}
SUM, PROD, MIN, MAX, AVG = "sum", "prod", "min", "max", "avg"
_OPS = {SUM: 0, PROD: 1, MIN: 2, MAX: 3, AVG: 4}


class FastReduceError(RuntimeError):
    """A call failed; .status is the fr_status_t name, .detail the library's message."""

    def __init__(self, status, detail):
        self.status = _STATUS[status] if 0 <= status < len(_STATUS) else "FR_ERR_%d" % status
        self.detail = detail
        super().__init__("%s: %s" % (self.status, detail))


class ArgumentError(FastReduceError, ValueError):
    """The arguments were refused (bad buffer, type, op, root or count)."""


def _load():
    path = os.environ.get("FASTREDUCE_LIB") or ctypes.util.find_library("fastreduce")
    if not path:
        raise ImportError("libfastreduce not found: set FASTREDUCE_LIB to the path of libfastreduce.so")
    lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    lib.fr_last_error.restype = ctypes.c_char_p
    lib.fr_version.restype = ctypes.c_char_p
    lib.fr_comm_destroy.argtypes = [ctypes.c_void_p]
    lib.fr_comm_size.argtypes = lib.fr_comm_rank.argtypes = [ctypes.c_void_p]
    lib.fr_allreduce.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                                 ctypes.c_void_p]
    lib.fr_bcast.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
    for f in ("fr_allreduce_algorithm", "fr_bcast_algorithm"):
        getattr(lib, f).restype = ctypes.c_char_p
    lib.fr_allreduce_algorithm.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int]
    lib.fr_bcast_algorithm.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int]
    return lib


_lib = _load()


def version():
    return _lib.fr_version().decode()


def _check(status):
    if status != 0:
        detail = (_lib.fr_last_error() or b"").decode(errors="replace")
        raise (ArgumentError if status in _ARG_ERRORS else FastReduceError)(status, detail)


class _Buffer:
    """A writable (or, for sendbuf, readable) C-contiguous buffer: its address, element count and fr type."""

    def __init__(self, obj, writable, what):
        try:
            mv = memoryview(obj)
        except TypeError:
            raise ArgumentError(1, "%s: a %s has no buffer interface" % (what, type(obj).__name__)) from None
        if not mv.c_contiguous:
            raise ArgumentError(1, "%s is not contiguous (use numpy.ascontiguousarray)" % what)
        if writable and mv.readonly:
            raise ArgumentError(1, "%s is read-only" % what)
        name = getattr(getattr(obj, "dtype", None), "name", None)
        if name not in _DTYPES:
            fmt = mv.format.lstrip("@=<")
            if fmt in ("l", "L"):
                fmt = {("l", 8): "q", ("L", 8): "Q", ("l", 4): "i", ("L", 4): "I"}[(fmt, mv.itemsize)]
            name = _FORMATS.get(fmt)
        if name is None:
            raise ArgumentError(1, "%s: element type %r is not one of %s" % (what, mv.format, ", ".join(_DTYPES)))
        self.dtype = _DTYPES[name]
        self.count = mv.nbytes // mv.itemsize if mv.itemsize else 0
        self.nbytes = mv.nbytes
        self.mv = mv   # keeps the object alive while the call runs
        if mv.nbytes == 0:
            self.addr = None
        elif mv.readonly:
            # read-only memory (a sendbuf, say bytes): a private copy to hand over
            self.keep = ctypes.create_string_buffer(mv.tobytes(), mv.nbytes)
            self.addr = ctypes.addressof(self.keep)
        else:
            self.addr = ctypes.addressof(ctypes.c_char.from_buffer(mv.cast("B")))


class Comm:
    """A fastreduce communicator over the ranks of an mpi4py communicator (collective)."""

    def __init__(self, mpi_comm=None):
        from mpi4py import MPI
        if mpi_comm is None:
            mpi_comm = MPI.COMM_WORLD
        if not isinstance(mpi_comm, MPI.Comm):
            raise ArgumentError(1, "Comm() takes an mpi4py MPI.Comm, not a %s" % type(mpi_comm).__name__)
        handle = MPI._handleof(mpi_comm)
        ctype = ctypes.c_void_p if MPI._sizeof(MPI.Comm) == ctypes.sizeof(ctypes.c_void_p) else ctypes.c_int
        self._h = ctypes.c_void_p()
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

    def allreduce(self, sendbuf, recvbuf=None, op=SUM):
        """Reduce sendbuf over the ranks into recvbuf (or into sendbuf itself when recvbuf is None)."""
        if op not in _OPS:
            raise ArgumentError(1, "op %r is not one of %s" % (op, ", ".join(_OPS)))
        if recvbuf is None:
            b = _Buffer(sendbuf, True, "buf")
            _check(_lib.fr_allreduce(_IN_PLACE, b.addr, b.count, b.dtype, _OPS[op], self._live()))
            return sendbuf
        r = _Buffer(recvbuf, True, "recvbuf")
        s = _Buffer(sendbuf, False, "sendbuf")
        if (s.dtype, s.count) != (r.dtype, r.count):
            raise ArgumentError(1, "sendbuf and recvbuf differ in type or length (%d and %d elements)" %
                                (s.count, r.count))
        _check(_lib.fr_allreduce(s.addr, r.addr, r.count, r.dtype, _OPS[op], self._live()))
        return recvbuf

    def bcast(self, buf, root=0):
        """Broadcast buf from root, in place."""
        if not isinstance(root, int) or isinstance(root, bool):
            raise ArgumentError(4, "root must be an int, not %s" % type(root).__name__)
        b = _Buffer(buf, True, "buf")
        _check(_lib.fr_bcast(b.addr, b.count, b.dtype, root, self._live()))
        return buf

    def allreduce_algorithm(self, count, dtype="float32", op=SUM):
        """The algorithm fastreduce would use for an allreduce of count elements."""
        a = _lib.fr_allreduce_algorithm(self._live(), count, _DTYPES[dtype], _OPS[op])
        return a.decode() if a else None

    def free(self):
        """Collective: destroy the communicator (also at garbage collection, if MPI still runs)."""
        if self._h:
            h, self._h = self._h, ctypes.c_void_p()
            _check(_lib.fr_comm_destroy(h))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.free()
