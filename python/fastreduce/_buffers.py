"""What the package hands the library for a Python object: its address,
element count, fr_dtype_t and where it lives (host, or a CUDA device).

Objects are torch tensors (CPU and CUDA), NumPy arrays and anything else
with the buffer protocol. Every check happens before the library is
called, so that a refused argument leaves every buffer as it was.
"""
import ctypes
import sys

# fr_dtype_t, by NumPy / torch dtype name
DTYPES = {"int8": 0, "uint8": 1, "int32": 2, "uint32": 3, "int64": 4, "uint64": 5, "float16": 6, "bfloat16": 7,
          "float32": 8, "float64": 9}
# buffer-protocol format characters
_FORMATS = {"b": "int8", "B": "uint8", "i": "int32", "I": "uint32", "q": "int64", "Q": "uint64", "e": "float16",
            "f": "float32", "d": "float64"}


class Refused(ValueError):
    """An argument the package refuses: (fr status number, message)."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


class Buf:
    """addr (None when empty), count, dtype (fr_dtype_t), nbytes, cuda (the
    device index, or None for host memory) and obj, kept alive while used."""

    __slots__ = ("addr", "count", "dtype", "nbytes", "cuda", "obj", "keep")

    def __init__(self, obj, addr, count, dtype, nbytes, cuda=None, keep=None):
        self.obj, self.addr, self.count, self.dtype, self.nbytes, self.cuda, self.keep = \
            obj, addr, count, dtype, nbytes, cuda, keep

    @property
    def where(self):
        return "cuda:%d" % self.cuda if self.cuda is not None else "host"


def is_tensor(obj):
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.Tensor)


def _tensor(t, what, addr=True):
    name = str(t.dtype).replace("torch.", "")
    if name not in DTYPES:
        raise Refused(1, "%s: torch.%s is not one of fastreduce's types (%s); convert it with .to(...)" %
                      (what, name, ", ".join("torch." + n for n in DTYPES)))
    if str(t.layout) != "torch.strided":
        raise Refused(1, "%s: a %s tensor; pass a dense one (.to_dense())" % (what, str(t.layout)))
    if t.device.type not in ("cpu", "cuda"):
        raise Refused(1, "%s is on device %s; fastreduce takes CPU and CUDA tensors" % (what, t.device))
    if not t.is_contiguous():
        raise Refused(1, "%s is not contiguous: pass t.contiguous() (and copy the result back into t)" % what)
    cuda = (t.device.index or 0) if t.device.type == "cuda" else None
    n = t.numel()
    return Buf(t, t.data_ptr() if n and addr else None, n, DTYPES[name], n * t.element_size(), cuda)


def _buffer_protocol(obj, writable, what):
    try:
        mv = memoryview(obj)
    except TypeError:
        raise Refused(1, "%s: a %s has no buffer interface" % (what, type(obj).__name__)) from None
    if not mv.c_contiguous:
        raise Refused(1, "%s is not contiguous (use numpy.ascontiguousarray)" % what)
    if writable and mv.readonly:
        raise Refused(1, "%s is read-only" % what)
    # The library reads elements in this machine's byte order: another
    # order ('>f4' on x86) would be summed as garbage.
    order = mv.format[:1]
    if order in "<>!" and mv.itemsize > 1 and (order == "<") != (sys.byteorder == "little"):
        dt = getattr(obj, "dtype", None)
        fix = ".astype(%r)" % ("=" + dt.str[1:]) if hasattr(dt, "str") else "a copy in native byte order"
        raise Refused(1, "%s: element type %r is not in this machine's (%s-endian) byte order: pass %s" %
                      (what, mv.format, sys.byteorder, fix))
    name = getattr(getattr(obj, "dtype", None), "name", None)
    if name not in DTYPES:
        fmt = mv.format.lstrip("@=<")
        if fmt in ("l", "L"):
            fmt = {("l", 8): "q", ("L", 8): "Q", ("l", 4): "i", ("L", 4): "I"}[(fmt, mv.itemsize)]
        name = _FORMATS.get(fmt)
    if name is None:
        raise Refused(1, "%s: element type %r is not one of %s" % (what, mv.format, ", ".join(DTYPES)))
    count = mv.nbytes // mv.itemsize if mv.itemsize else 0
    if mv.nbytes == 0:
        return Buf(mv, None, count, DTYPES[name], 0)
    if mv.readonly:
        # read-only memory (a sendbuf, say bytes): a private copy to hand over
        keep = ctypes.create_string_buffer(mv.tobytes(), mv.nbytes)
        return Buf(mv, ctypes.addressof(keep), count, DTYPES[name], mv.nbytes, keep=keep)
    return Buf(mv, ctypes.addressof(ctypes.c_char.from_buffer(mv.cast("B"))), count, DTYPES[name], mv.nbytes)


NAMES = {v: k for k, v in DTYPES.items()}


def dtype_code(dtype, what):
    """The fr_dtype_t of @p dtype: a name ("float32"), a NumPy dtype or
    type, or a torch dtype; Refused for anything else."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(dtype, torch.dtype):
        name = str(dtype).replace("torch.", "")
    elif isinstance(dtype, str) and dtype in DTYPES:   # (bfloat16: NumPy has none)
        name = dtype
    else:
        import numpy
        try:
            # (None would be NumPy's float64: not a type anyone names)
            name = numpy.dtype(dtype).name if dtype is not None else None
        except (TypeError, ValueError):
            name = None
        if name is None:
            raise Refused(1, "%s %r is not a type: pass one of %s (a name, a NumPy or torch dtype)" %
                          (what, dtype, ", ".join(DTYPES)))
    if name not in DTYPES:
        raise Refused(1, "%s %s is not one of fastreduce's types (%s)" % (what, name, ", ".join(DTYPES)))
    return DTYPES[name]


def of(obj, writable, what, addr=True):
    """The Buf of @p obj (a tensor or a buffer-protocol object); Refused
    when unusable. @p addr False: a tensor's size and type only."""
    if is_tensor(obj):
        return _tensor(obj, what, addr)
    return _buffer_protocol(obj, writable, what)


def same_kind(bufs, what):
    """Refused unless every buffer has one dtype and one place (host, or one GPU)."""
    first = bufs[0]
    for b in bufs[1:]:
        if b.dtype != first.dtype:
            raise Refused(1, "%s mix element types (%s and %s): convert them to one" %
                          (what, NAMES[first.dtype], NAMES[b.dtype]))
        if b.cuda != first.cuda:
            raise Refused(1, "%s are in different places (%s and %s): move them to one device" %
                          (what, first.where, b.where))
