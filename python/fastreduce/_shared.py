"""Memory the node's ranks share: buffers of fr_mem_alloc, which a NumPy
array or a torch tensor can be made over. Collectives on them go zero-copy
where every rank's buffers are such memory (include/fastreduce.h, "Memory
the node's ranks share"). A buffer is freed when the last array or tensor
over it goes."""
import ctypes
import weakref


class _Freer:
    """fr_mem_free of one address, once (the finalizer of its buffer)."""

    def __init__(self, lib, addr):
        self.lib, self.addr = lib, addr

    def __call__(self):
        self.lib.fr_mem_free(ctypes.c_void_p(self.addr))


def buffer(lib, nbytes, error):
    """A writable ctypes array of @p nbytes in memory of fr_mem_alloc, freed
    when it is no longer referenced (arrays and tensors made over it keep it);
    @p error(status) makes the exception of a failed allocation."""
    if nbytes < 0:
        raise ValueError("a negative size")
    addr = ctypes.c_void_p()
    status = lib.fr_mem_alloc(max(int(nbytes), 1), ctypes.byref(addr))
    if status != 0:
        raise error(status)
    buf = (ctypes.c_byte * int(nbytes)).from_address(addr.value)
    # Never freed at exit: a request may still be using it then (the
    # library's thread too), and the process's memory and memfds go with it.
    weakref.finalize(buf, _Freer(lib, addr.value)).atexit = False
    return buf


def count_of(shape):
    """The elements of @p shape (an int or a sequence of ints)."""
    if isinstance(shape, int):
        shape = (shape,)
    n = 1
    for d in shape:
        if int(d) < 0:
            raise ValueError("a negative dimension in %r" % (shape,))
        n *= int(d)
    return tuple(int(d) for d in shape), n
