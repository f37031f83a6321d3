"""What a luabridge actor on Ray does with the CPUs Ray gives it."""
from __future__ import annotations

import ray

from ..core.runtime import bridge


def assigned_cpus() -> int | None:
    """The CPUs Ray gives the calling worker (at least 1), or None outside a Ray worker (a driver
    may call a Predictor too: Ray assigns CPUs to workers only)."""
    if not ray.is_initialized() or ray.get_runtime_context().worker.mode != ray.WORKER_MODE:
        return None
    cpus = ray.get_runtime_context().get_assigned_resources().get("CPU")
    return max(1, int(cpus)) if cpus else None


def use_assigned_cpus() -> int | None:
    """Sets the calling thread's Lua BLAS threads (torch.setnumthreads) to assigned_cpus(), so
    that actors sharing a machine do not oversubscribe it; returns that count (None: unchanged)."""
    threads = assigned_cpus()
    if threads is not None:
        b = bridge()
        b.call(b.module("torch").setnumthreads, threads)
    return threads
