"""pytest under mpirun (2 and 3 ranks): every rank runs every test in the
same order; expected values are computed on every rank from every rank's
input, never with fastreduce or MPI."""
import ctypes

import numpy as np
import pytest
from mpi4py import MPI

import fastreduce as fr

W = MPI.COMM_WORLD
ME, NP = W.Get_rank(), W.Get_size()


@pytest.fixture(scope="module")
def comm():
    c = fr.Comm(W)
    yield c
    c.free()


def inputs(dtype, n, r):
    return ((np.arange(n) * 7 + r * 3) % 11).astype(dtype)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32",
                                   "float64"])
@pytest.mark.parametrize("op", ["sum", "prod", "min", "max", "avg"])
@pytest.mark.parametrize("n", [0, 1, 7, 1000, 65537])
def test_allreduce(comm, dtype, op, n):
    mine = inputs(dtype, n, ME)
    every = [inputs(dtype, n, r) for r in range(NP)]
    if op in ("sum", "avg"):
        want = np.sum(np.stack(every).astype(np.float64), axis=0) if n else np.zeros(0)
        want = want / NP if op == "avg" else want
    elif op == "prod":
        want = np.prod(np.stack(every).astype(np.float64), axis=0) if n else np.zeros(0)
    else:
        want = (np.min if op == "min" else np.max)(np.stack(every), axis=0) if n else np.zeros(0)
    if np.dtype(dtype).kind in "iu":
        if op == "avg":   # C division of the (wrapped) sum, truncating toward zero
            s = np.sum(np.stack(every).astype(np.int64), axis=0) if n else np.zeros(0, np.int64)
            want = (np.trunc(s / NP)).astype(np.int64)
        want = np.asarray(want).astype(np.int64).astype(dtype)
    else:
        want = np.asarray(want).astype(dtype)
    out = np.full(n, 99, dtype=dtype)
    got = comm.allreduce(mine, out, op=op)
    assert got is out
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(mine, inputs(dtype, n, ME))   # sendbuf untouched
    inplace = inputs(dtype, n, ME)
    comm.allreduce(inplace, op=op)
    np.testing.assert_array_equal(inplace, want)


@pytest.mark.parametrize("n", [0, 1, 1000, 100003])
def test_bcast_every_root(comm, n):
    for root in range(NP):
        buf = np.arange(n, dtype=np.float32) + root if ME == root else np.zeros(n, np.float32)
        comm.bcast(buf, root=root)
        np.testing.assert_array_equal(buf, np.arange(n, dtype=np.float32) + root)


def test_buffer_protocol(comm):
    b = bytearray(bytes([ME + 1]) * 10)        # uint8 through the buffer protocol
    comm.allreduce(b, op="sum")
    assert bytes(b) == bytes([NP * (NP + 1) // 2]) * 10
    out = bytearray(4)
    comm.allreduce(bytes([1, 2, 3, 4]), out)   # a read-only sendbuf
    assert list(out) == [NP, 2 * NP, 3 * NP, 4 * NP]
    a = memoryview(np.full(5, ME, dtype=np.int64))
    comm.allreduce(a, op="max")
    assert list(a) == [NP - 1] * 5


def test_bad_input(comm):
    with pytest.raises(fr.ArgumentError, match="op 'xor'"):
        comm.allreduce(np.zeros(3, np.float32), op="xor")
    with pytest.raises(fr.ArgumentError, match="read-only"):
        comm.allreduce(b"abc")
    with pytest.raises(fr.ArgumentError, match="not contiguous"):
        comm.allreduce(np.zeros((4, 4), np.float32)[:, 1])
    with pytest.raises(fr.ArgumentError, match="element type"):
        comm.allreduce(np.zeros(3, np.complex64))
    with pytest.raises(fr.ArgumentError, match="differ"):
        comm.allreduce(np.zeros(3, np.float32), np.zeros(4, np.float32))
    with pytest.raises(fr.ArgumentError, match="FR_ERR_ROOT"):
        comm.bcast(np.zeros(3, np.float32), root=NP)
    with pytest.raises(fr.ArgumentError, match="MPI.Comm"):
        fr.Comm("world")
    # after all that, the communicator still works
    x = np.ones(4, np.int32)
    comm.allreduce(x)
    assert (x == NP).all()


def test_other_byte_order_refused(comm):
    """An array in the other byte order is refused, not summed as garbage;
    the same values in this machine's order reduce right."""
    other = ">" if np.little_endian else "<"
    for dt in ("f4", "i8", "f2"):
        x = np.arange(1, 4).astype(other + dt)
        keep = x.copy()
        with pytest.raises(fr.ArgumentError, match=r"byte order: pass \.astype\('=%s'\)" % dt):
            comm.allreduce(x)
        assert np.array_equal(x, keep)
        with pytest.raises(fr.ArgumentError, match="byte order"):
            comm.allreduce(np.arange(1, 4).astype("=" + dt), x)
        n = x.astype("=" + dt)
        comm.allreduce(n)
        assert np.array_equal(n, np.arange(1, 4) * NP)
    be = (ctypes.c_float.__ctype_be__ if np.little_endian else ctypes.c_float.__ctype_le__) * 3
    with pytest.raises(fr.ArgumentError, match="byte order: pass a copy in native byte order"):
        comm.allreduce(be(1, 2, 3))
    one = np.arange(3, dtype=other + "u1")   # one byte: no order
    comm.allreduce(one)
    assert np.array_equal(one, np.arange(3) * NP)


def test_split_communicator():
    sub = W.Split(ME % 2, ME)
    with fr.Comm(sub) as c:
        x = np.array([ME], np.int64)
        c.allreduce(x)
        assert x[0] == sum(r for r in range(NP) if r % 2 == ME % 2)
        assert c.size == sub.Get_size() and c.rank == sub.Get_rank()
    with pytest.raises(fr.FastReduceError, match="freed"):
        c.allreduce(np.zeros(1, np.int32))
    sub.Free()


def test_algorithm_query(comm):
    a = comm.allreduce_algorithm(1 << 20)
    assert isinstance(a, str) and a


@pytest.mark.parametrize("dt", ["int8", "float32", "float64"])
def test_algorithm_query_names_a_type_every_way(comm, dt):
    """A count with a type's name, NumPy dtype or type asks what an array of
    that size and type is asked."""
    for n in (1, 1 << 16, 1 << 22):
        want = comm.allreduce_algorithm(np.zeros(n, dt))
        assert isinstance(want, str) and want
        for name in (dt, np.dtype(dt), getattr(np, dt)):
            assert comm.allreduce_algorithm(n, name) == want
            assert comm.allreduce_algorithm(np.int64(n), name, op="max") == comm.allreduce_algorithm(
                np.zeros(n, dt), op="max")


@pytest.mark.parametrize("args,kw,message", [
    ((10, "int16"), {}, "dtype int16 is not one of fastreduce's types"),
    ((10, "nonsense"), {}, "dtype 'nonsense' is not a type"),
    ((10, None), {}, "dtype None is not a type"),
    ((-1,), {}, "count -1 is not an element count"),
    ((1 << 64,), {}, "is not an element count"),
    ((1 << 62, "float32"), {}, "more than the library takes"),
    ((10,), {"op": ["sum"]}, r"op \['sum'\] is not one of"),
    ((10,), {"op": "xor"}, "op 'xor' is not one of"),
    ((1.5,), {}, "count: a float has no buffer interface"),
])
def test_algorithm_query_refuses(comm, args, kw, message):
    with pytest.raises(fr.ArgumentError, match=message):
        comm.allreduce_algorithm(*args, **kw)


def test_unhashable_op_refused(comm):
    x = np.ones(3, np.float32)
    for call in (lambda: comm.allreduce(x, op=["sum"]), lambda: comm.allreduce_group([x], op={"sum": 1})):
        with pytest.raises(fr.ArgumentError, match="is not one of"):
            call()
    assert np.array_equal(x, np.ones(3))
