"""The worker threads of the fused CPU groups (lua/luabridge/graph/fusion_threads.lua).

A blocked group (luabridge/graph/passes/fuse.py's "blocked" form) with enough work (elements x
its passes' cost, fusion_ir.lua's THREAD_LEAST) runs its blocks in chunks on several threads:
the calling one and workers of its runtime (threads.Thread runtimes of their own, waiting on a
pthread condition), as many as torch.setnumthreads allows, never more than the free CPUs where
the host's thread rule (blas.threadsFor) is lent. Each chunk runs the same numpy loops the one-thread
kernel runs, so the values are the same bit for bit. These helpers act on the calling thread's
runtime; LUABRIDGE_FUSION_THREADS=0 turns the threads off for every runtime.

The workers end when `stop()` (or `luabridge.stop_workers()`, which ends every team of the
runtime) is called in their runtime's thread (a later threaded run starts new ones), within a
second or so of that thread's end (they look while idle), or when their runtime is collected.
They are daemon threads: interpreter exit does not wait for them.
"""
from __future__ import annotations

from typing import Any, Optional

from ..core.runtime import bridge

MODULE = "luabridge.graph.fusion_threads"

def _module() -> Any:
    b = bridge()
    return b, b.module(MODULE)


def threaded(on: Optional[bool] = None) -> bool:
    """Whether large fused CPU groups may run on several threads (in this thread's runtime);
    with `on`, sets it first. Read at every run, so it applies to plans already built."""
    b, m = _module()
    return bool(b.call(m.threaded, on))


def jobs() -> tuple[int, int]:
    """(group runs split over threads, chunks the workers ran) in this thread's runtime so far."""
    b, m = _module()
    runs, helped = b.call(m.runs)
    return int(runs), int(helped)


def stop() -> None:
    """Ends this thread's runtime's team of workers (fused groups, parallel loops) and waits for
    them; a later threaded run starts a new team. Loads nothing: a runtime that never ran a
    threaded group has no team."""
    b = bridge()
    b.call(b.load("local m = package.loaded['luabridge.graph.fusion_threads']; if m then m.stop() end",
                  "=fusion_threads.stop"))
