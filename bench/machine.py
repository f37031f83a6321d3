"""What the benchmark tables were measured on."""
from __future__ import annotations

import os
import platform
import time
from typing import Any, Callable


def cpu_name() -> str:
    """The CPU's model name (from /proc/cpuinfo where there is one)."""
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def cores() -> int:
    """The number of CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def gemm_gflops(product: Callable[[], Any], n: int, repeats: int = 5) -> float:
    """GFLOP/s of the fastest of `repeats` calls of product(), one n x n by n x n matrix product
    (after a warm-up call)."""
    product()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        product()
        best = min(best, time.perf_counter() - t0)
    return 2 * n ** 3 / best / 1e9


def vector_extension() -> str:
    """The widest x86 vector extension the CPU has (AVX-512, AVX2, ...), or ''."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:
        return ""
    return next((name for flag, name in (("avx512f", "AVX-512"), ("avx2", "AVX2"), ("avx", "AVX"),
                                         ("sse4_2", "SSE4.2")) if flag in flags), "")
