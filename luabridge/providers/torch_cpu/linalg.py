"""BLAS/LAPACK for the Lua side: where numpy's library is, and a numpy fallback for BLAS.

The Lua BLAS backend (lua/torch/backend/cpu/blas.lua) asks `blas_library` once for the shared
library numpy itself links (OpenBLAS in the pip wheels) and its symbol naming, and then calls it
through the LuaJIT FFI with no Python in the way. Where no such library can be found (or
LUABRIDGE_BLAS=numpy asks for it), the `blas_*` callbacks below do the same column-major BLAS
calls with numpy over the shared memory; LAPACK is then unavailable.

Threads: the Lua side sets OpenBLAS's thread count per call (lua/torch/backend/cpu/blas.lua).
OpenBLAS's idle workers spin (calling sched_yield) for 2**28 clock ticks, about 0.1 s, after every
threaded call before they sleep, taking a core from the rest of the process and from other
processes. `quiet_workers` shortens that wait to THREAD_TIMEOUT once per process: the library
reads OPENBLAS_THREAD_TIMEOUT only when it starts its thread pool, so the variable is set, the
library rereads its environment and the pool is restarted. A timeout the user set is left alone.
"""
from __future__ import annotations

import ctypes
import glob
import os
import signal
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

import numpy as np

from ...core.memory import DTYPES

if TYPE_CHECKING:
    from ...core.runtime import Bridge

# log2 of the clock ticks an idle OpenBLAS worker waits for work before sleeping (2**18 ticks:
# about 0.1 ms, enough for the next product of a loop over images; bench/gemm_threads.py)
THREAD_TIMEOUT = 18

# (prefix, suffix) of the symbol names: prefix + 'cblas_dgemm' + suffix, prefix + 'dgesv_' + suffix
_SCHEMES = (("scipy_", "64_"), ("", "64_"), ("", ""))


@dataclass(frozen=True)
class BlasLibrary:
    path: str
    prefix: str
    suffix: str
    int_bits: int
    lapack: bool


def _candidate_paths() -> Iterator[str]:
    """Shared libraries that may hold numpy's BLAS: those shipped beside numpy, then loaded ones."""
    root = Path(np.__file__).resolve().parent
    for folder in (root.parent / "numpy.libs", root / ".libs", root / ".dylibs", root / "_core"):
        for pattern in ("*openblas*", "*blas*", "*mkl_rt*", "*lapack*"):
            yield from sorted(glob.glob(str(folder / pattern)))
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split()[-1]
                name = os.path.basename(path)
                if path.startswith("/") and any(k in name for k in ("blas", "mkl_rt", "lapack")):
                    yield path
    except OSError:
        pass


def _int_bits(lib: ctypes.CDLL, suffix: str) -> int:
    """64 for an ILP64 build (64-bit integer arguments), else 32."""
    if suffix:
        return 64
    config = getattr(lib, "openblas_get_config", None)
    if config is not None:
        config.restype = ctypes.c_char_p
        if b"USE64BITINT" in (config() or b""):
            return 64
    return 32


def _probe(path: str) -> BlasLibrary | None:
    try:
        lib = ctypes.CDLL(path)
    except OSError:
        return None
    for prefix, suffix in _SCHEMES:
        if hasattr(lib, prefix + "cblas_dgemm" + suffix) and hasattr(lib, prefix + "cblas_sgemm" + suffix):
            lapack = all(hasattr(lib, f"{prefix}{t}gesv_{suffix}") for t in "sd")
            return BlasLibrary(path, prefix, suffix, _int_bits(lib, suffix), lapack)
    return None


def find_blas() -> BlasLibrary | None:
    """numpy's BLAS library and its naming, or None (also when LUABRIDGE_BLAS=numpy)."""
    if os.environ.get("LUABRIDGE_BLAS", "").lower() == "numpy":
        return None
    seen: set[str] = set()
    for path in _candidate_paths():
        real = os.path.realpath(path)
        if real in seen or not os.path.isfile(real):
            continue
        seen.add(real)
        found = _probe(real)
        if found is not None:
            return found
    return None


# ------------------------------------------------------------------------------------------
# numpy fallback: the same column-major calls, over raw addresses of the shared memory


def _array(type_name: str, hi: int, lo: int, shape: tuple[int, ...], strides: tuple[int, ...]) -> np.ndarray:
    """An array over memory at address hi * 2**32 + lo, with element strides."""
    dtype = DTYPES[type_name]
    shape = tuple(int(s) for s in shape)
    strides = tuple(int(s) for s in strides)
    extent = 0 if 0 in shape else 1 + sum((n - 1) * s for n, s in zip(shape, strides))
    buf = (ctypes.c_char * max(extent * dtype.itemsize, 1)).from_address((int(hi) << 32) + int(lo))
    return np.ndarray(shape, dtype=dtype, buffer=buf, strides=tuple(s * dtype.itemsize for s in strides))


def _matrix(type_name: str, trans: bool, rows: int, cols: int, hi: int, lo: int, ld: int) -> np.ndarray:
    """op(A), rows x cols, of a column-major A with leading dimension ld (A^T when trans)."""
    if trans:
        return _array(type_name, hi, lo, (rows, cols), (ld, 1))
    return _array(type_name, hi, lo, (rows, cols), (1, ld))


def _update(c: np.ndarray, beta: float, alpha: float, product: np.ndarray) -> None:
    """c = beta * c + alpha * product (c is not read when beta is 0)."""
    if beta == 0:
        np.multiply(product, alpha, out=c, casting="unsafe")
    else:
        c *= beta
        c += alpha * product


def blas_gemm(type_name: str, ta: bool, tb: bool, m: int, n: int, k: int, alpha: float,
              ahi: int, alo: int, lda: int, bhi: int, blo: int, ldb: int, beta: float,
              chi: int, clo: int, ldc: int) -> None:
    a = _matrix(type_name, ta, m, k, ahi, alo, lda)
    b = _matrix(type_name, tb, k, n, bhi, blo, ldb)
    c = _matrix(type_name, False, m, n, chi, clo, ldc)
    if beta == 0 and alpha == 1:
        np.matmul(a, b, out=c)
    else:
        _update(c, beta, alpha, a @ b)


def blas_gemv(type_name: str, trans: bool, m: int, n: int, alpha: float, ahi: int, alo: int, lda: int,
              xhi: int, xlo: int, incx: int, beta: float, yhi: int, ylo: int, incy: int) -> None:
    a = _matrix(type_name, False, m, n, ahi, alo, lda)
    if trans:
        a = a.T
    x = _array(type_name, xhi, xlo, (a.shape[1],), (incx,))
    y = _array(type_name, yhi, ylo, (a.shape[0],), (incy,))
    _update(y, beta, alpha, a @ x)


def blas_ger(type_name: str, m: int, n: int, alpha: float, xhi: int, xlo: int, incx: int,
             yhi: int, ylo: int, incy: int, ahi: int, alo: int, lda: int) -> None:
    x = _array(type_name, xhi, xlo, (m,), (incx,))
    y = _array(type_name, yhi, ylo, (n,), (incy,))
    a = _matrix(type_name, False, m, n, ahi, alo, lda)
    a += alpha * np.multiply.outer(x, y)


def blas_dot(type_name: str, n: int, xhi: int, xlo: int, incx: int, yhi: int, ylo: int, incy: int) -> float:
    x = _array(type_name, xhi, xlo, (n,), (incx,))
    y = _array(type_name, yhi, ylo, (n,), (incy,))
    return float(np.dot(x, y))


_quieted: set[str] = set()
_quieting = threading.Lock()   # runtimes of several threads may start at once


def quiet_workers(found: BlasLibrary) -> None:
    """OpenBLAS's idle workers sleep after THREAD_TIMEOUT (see the module's doc); once per library."""
    with _quieting:
        if found.path in _quieted or "OPENBLAS_THREAD_TIMEOUT" in os.environ:
            return
        _quieted.add(found.path)
        _restart_pool(found)


def _restart_pool(found: BlasLibrary) -> None:
    """Sets the timeout and restarts OpenBLAS's pool, which reads it (a library without these
    entry points is left as it is)."""
    lib = ctypes.CDLL(found.path)
    read_env = getattr(lib, "openblas_read_env", None)
    shutdown = getattr(lib, "blas_thread_shutdown_", None)
    count = getattr(lib, f"{found.prefix}openblas_get_num_threads{found.suffix}", None)
    restart = getattr(lib, f"{found.prefix}openblas_set_num_threads{found.suffix}", None)
    if None in (read_env, shutdown, count, restart):
        return
    os.environ["OPENBLAS_THREAD_TIMEOUT"] = str(THREAD_TIMEOUT)
    read_env()
    threads = count()
    # The new workers inherit this thread's signal mask: with SIGINT blocked in them, Ctrl-C
    # always reaches the main thread (one that readline is redrawing then gets it once it unblocks;
    # a worker would take it, and the main thread would sit in readline until the next key).
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        shutdown()
        restart(threads)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def spin_seconds() -> float:
    """At most how long OpenBLAS's workers spin after a call (its clock ticks at 1 GHz or more)."""
    try:
        timeout = min(max(int(os.environ.get("OPENBLAS_THREAD_TIMEOUT", "")), 4), 30)
    except ValueError:
        timeout = 28
    return 2 ** timeout / 1e9


def threads() -> tuple[int, int, float]:
    """For Lua: torch.getnumthreads() before any setnumthreads (OMP_NUM_THREADS when set, else
    the cores this process may run on), the machine's online CPUs, and spin_seconds()."""
    try:
        wanted = int(os.environ.get("OMP_NUM_THREADS", ""))
    except ValueError:
        wanted = 0
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return (wanted if wanted > 0 else cores), os.cpu_count() or cores, spin_seconds()


def blas_library() -> tuple[Any, ...] | None:
    """For Lua: (path, prefix, suffix, int bits, has LAPACK) of the BLAS library, or nil."""
    found = find_blas()
    if found is None:
        return None
    quiet_workers(found)
    return found.path, found.prefix, found.suffix, found.int_bits, found.lapack


def callbacks(bridge: "Bridge") -> dict:
    return {
        "blas_library": blas_library,
        "blas_threads": threads,
        "blas_gemm": blas_gemm,
        "blas_gemv": blas_gemv,
        "blas_ger": blas_ger,
        "blas_dot": blas_dot,
    }
