"""What the benchmark tables were measured on."""
from __future__ import annotations

import os
import platform
import threading
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


def thread_cpu_times() -> dict[int, float]:
    """CPU seconds (user + system) of each thread of this process, by thread id (Linux /proc, in
    clock ticks: time blocks of a second or more keep the error near 1%)."""
    tick = os.sysconf("SC_CLK_TCK")
    times = {}
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()   # after the command name, which may hold spaces
        except OSError:   # a thread that ended meanwhile
            continue
        times[int(task)] = (int(fields[11]) + int(fields[12])) / tick   # utime, stime
    return times


def thread_time(step: Callable[[int], Any], reps: int, threads: int) -> tuple[float, float]:
    """`step(reps)`'s serial fraction on `threads` threads (see serial_fraction) and the CPU
    seconds of all of this process's threads per step (the calling thread's and the workers')."""
    main = threading.get_native_id()
    before = thread_cpu_times()
    t0 = time.perf_counter()
    step(reps)
    wall = time.perf_counter() - t0
    after = thread_cpu_times()
    spent = {tid: cpu - before.get(tid, 0.0) for tid, cpu in after.items()}
    workers = sum(cpu for tid, cpu in spent.items() if tid != main)
    parallel = min(workers / max(threads - 1, 1), wall) if threads > 1 else 0.0
    serial = wall - parallel
    return serial / max(serial + threads * parallel, 1e-12), sum(spent.values()) / reps


def serial_fraction(step: Callable[[int], Any], reps: int, threads: int) -> float:
    """Amdahl's serial fraction of `step` run on `threads` threads, from thread CPU time: the
    workers' CPU time spread evenly over threads - 1 workers is the wall time spent in parallel
    regions (where the calling thread works too); the rest of the wall time ran on one thread.
    As a share of the one-thread work: serial / (serial + threads * parallel). A worker that
    spins while it waits counts as working, so a library whose threads spin looks more parallel
    than it is (the Karp-Flatt figure, from wall times alone, has no such bias)."""
    return thread_time(step, reps, threads)[0]


def karp_flatt(one_thread: float, n_threads: float, threads: int) -> float:
    """The serial fraction that Amdahl's law gives for the measured speed-up at `threads` threads
    (Karp and Flatt, 1990): (T_N / T_1 - 1/N) / (1 - 1/N)."""
    return (n_threads / one_thread - 1 / threads) / (1 - 1 / threads)


def amdahl_speedup(serial: float, threads: int) -> float:
    """The speed-up over one thread that a serial fraction allows on `threads` cores."""
    return 1 / (serial + (1 - serial) / threads)
