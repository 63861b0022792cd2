"""Finding and loading libfastreduce, and the C signatures the package calls.

The library is looked for, in order: FASTREDUCE_LIB (a path to
libfastreduce.so); the libdir of `pkg-config fastreduce` (an installed
prefix, PKG_CONFIG_PATH as for a C program); the system's library path. It
must be the build made with the MPI that mpi4py was built with.
"""
import ctypes
import ctypes.util
import importlib.util
import os
import shutil
import subprocess


def _from_pkg_config():
    if not shutil.which("pkg-config"):
        return None
    try:
        libdir = subprocess.run(["pkg-config", "--variable=libdir", "fastreduce"], capture_output=True, text=True,
                                timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    path = os.path.join(libdir, "libfastreduce.so") if libdir else ""
    return path if os.path.exists(path) else None


def find_library():
    """The path (or name) of the libfastreduce this package loads, or None."""
    return os.environ.get("FASTREDUCE_LIB") or _from_pkg_config() or ctypes.util.find_library("fastreduce")


def _signatures(lib):
    P, S, I, U64 = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_uint64
    lib.fr_last_error.restype = ctypes.c_char_p
    lib.fr_version.restype = ctypes.c_char_p
    lib.fr_comm_destroy.argtypes = [P]
    lib.fr_comm_size.argtypes = lib.fr_comm_rank.argtypes = [P]
    lib.fr_allreduce.argtypes = [P, P, S, I, I, P]
    lib.fr_bcast.argtypes = [P, S, I, I, P]
    lib.fr_allreduce_stream.argtypes = [P, P, S, I, I, P, P]
    lib.fr_bcast_stream.argtypes = [P, S, I, I, P, P]
    lib.fr_iallreduce.argtypes = [P, P, S, I, I, P, ctypes.POINTER(U64)]
    lib.fr_ibcast.argtypes = [P, S, I, I, P, ctypes.POINTER(U64)]
    lib.fr_allreduce_group.argtypes = [P, P, P, S, I, I, P]
    lib.fr_iallreduce_group.argtypes = [P, P, P, S, I, I, P, ctypes.POINTER(U64)]
    lib.fr_test.argtypes = [ctypes.POINTER(U64), ctypes.POINTER(I)]
    lib.fr_wait.argtypes = [ctypes.POINTER(U64)]
    lib.fr_mem_alloc.argtypes = [S, ctypes.POINTER(P)]
    lib.fr_mem_free.argtypes = [P]
    lib.fr_mem_shared.argtypes = [P, S]
    lib.fr_span_begin.argtypes = [ctypes.c_char_p]
    lib.fr_span_begin.restype = lib.fr_span_end.restype = None
    for f in ("fr_allreduce_algorithm", "fr_bcast_algorithm", "fr_allreduce_algorithm_device",
              "fr_bcast_algorithm_device"):
        getattr(lib, f).restype = ctypes.c_char_p
        getattr(lib, f).argtypes = [P, S, I, I]
    return lib


def _torch_first():
    """Import torch, where installed, before the library: a libfastreduce
    built with CUDA needs libcudart and libnccl, and the process must have
    one copy of each, torch's (CUDA tensors and streams come from it; an
    older copy loaded first leaves torch without the symbols it needs)."""
    if importlib.util.find_spec("torch") is not None:
        import torch  # noqa: F401


def load():
    _torch_first()
    path = find_library()
    if not path:
        raise ImportError("libfastreduce not found: install it where pkg-config finds it (PKG_CONFIG_PATH), or "
                          "set FASTREDUCE_LIB to the path of libfastreduce.so")
    # ctypes.CDLL releases the GIL during every call: other Python threads
    # (a training loop, a data loader) run while the library works.
    return _signatures(ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL))
