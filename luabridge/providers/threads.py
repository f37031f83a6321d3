"""The OS threads behind Lua's `threads` package (lua/threads): a pool's workers, threads.Thread,
and the shared memory of Mutex, Condition and tds.AtomicCounter.

Each worker is a Python thread with its own LuaJIT runtime (runtime.bridge() keeps one per
thread), so its globals are its own. lupa releases the GIL while Lua runs, so workers run Lua in
parallel; they take the GIL only to call back into Python, and a worker calls it seldom: its
runtime reuses released buffers without a call (torch.memory.reuse), and image decoding is one
short call per image whose decoder runs without the GIL (lua/image/files.lua). Jobs and
results travel as numpy arrays: the bytes the pool's serialization module wrote into a
CharStorage, and the storages lua/threads/transfer.lua lists beside them (every one for
threads.sharedserialize, shared; fresh copies of the big ones for threads.serialize). Each
runtime that receives an array registers it in its own BufferRegistry, so a buffer lives while
any runtime holds a storage over it.
"""
from __future__ import annotations

import atexit
import queue
import sys
import threading
import weakref
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from ..core.dtypes import TYPE_OF_DTYPE
from ..core.memory import lua_list, split_address
from ..core.runtime import bridge

if TYPE_CHECKING:
    from ..core.runtime import Bridge

_STOP, _TOGGLE = "stop", "toggle"   # control messages in a worker's queue
# Shared memory of Mutex, Condition and AtomicCounter objects by address (their Lua id); the
# arrays live in the BufferRegistry of each runtime holding one, and leave here with the last.
_handles: "weakref.WeakValueDictionary[int, np.ndarray]" = weakref.WeakValueDictionary()
_handles_lock = threading.Lock()
_live_pools: "weakref.WeakSet[Pool]" = weakref.WeakSet()
WORKER_POOL_MIN = 64 << 10


def _address(array: np.ndarray) -> int:
    return int(array.ctypes.data)


def _array_of(b: "Bridge", storage: Any) -> np.ndarray:
    """The numpy view (sharing memory, keeping it alive) of a CPU storage of runtime b."""
    return b.buffers.storage_view(storage, storage._dt.name, 0, [storage._n], [1])


def _arrays_of(b: "Bridge", storages: Any) -> list[np.ndarray]:
    return [_array_of(b, s) for s in lua_list(storages)]


def _describe(b: "Bridge", arrays: list[np.ndarray]) -> Any:
    """arrays registered in b's buffers, as the flat Lua list threads/transfer.lua turns into
    storages: id, address high, address low, element count, element type name per array."""
    flat: list[Any] = []
    for array in arrays:
        flat += [b.buffers.register(array), *split_address(_address(array)), array.size,
                 TYPE_OF_DTYPE[array.dtype]]
    return b.lua.table_from(flat)


class Pool:
    """N worker threads, each with its own Lua runtime, fed through one shared job queue and a
    queue per worker (torch/threads' specific mode); results come back through one queue."""

    def __init__(self, n: int, serialization: str, package_path: str) -> None:
        self.n = n
        self.shared: queue.SimpleQueue = queue.SimpleQueue()
        self.own = [queue.SimpleQueue() for _ in range(n)]
        self.results: queue.SimpleQueue = queue.SimpleQueue()
        self.specific = True       # workers start reading their own queues, as torch/threads'
        self._toggled = threading.Semaphore(0)
        self.workers = [
            threading.Thread(target=_work, name=f"luabridge-threads-{i + 1}", daemon=True,
                             args=(i + 1, serialization, package_path, self.own[i], self.shared,
                                   self.results, self._toggled))
            for i in range(n)]
        for worker in self.workers:
            worker.start()
        _live_pools.add(self)

    def queued(self, index: int) -> int:
        """Jobs not yet taken from worker index's own queue (0: the shared queue)."""
        return (self.own[index - 1] if index else self.shared).qsize()

    def put(self, index: int, job: tuple) -> None:
        (self.own[index - 1] if index else self.shared).put(job)

    def set_specific(self, flag: bool) -> None:
        """Moves every worker to its own queue (True) or the shared one, returning once all
        have moved: each takes exactly one toggle from the queue it reads."""
        if flag == self.specific:
            return
        for q in self._reading():
            q.put(_TOGGLE)
        for _ in range(self.n):
            self._toggled.acquire()
        self.specific = flag

    def _reading(self) -> list[queue.SimpleQueue]:
        """One queue entry per worker, in the queues the workers read now."""
        return list(self.own) if self.specific else [self.shared] * self.n

    def close(self) -> None:
        """Stops the workers after the jobs already queued, and joins them."""
        if not getattr(self, "workers", None):   # closed, or __init__ failed before starting any
            return
        for q in self._reading():
            q.put(_STOP)
        workers, self.workers = self.workers, []
        for worker in workers:
            if worker is not threading.current_thread():
                worker.join()

    def __del__(self) -> None:
        self.close()


def _work(thread_id: int, serialization: str, package_path: str, own: queue.SimpleQueue,
          shared: queue.SimpleQueue, results: queue.SimpleQueue, toggled: threading.Semaphore) -> None:
    """A worker's life: its runtime, then jobs from the queue it reads until a stop."""
    run = _job_runner(thread_id, serialization, package_path)
    reading = own
    while True:
        job = reading.get()
        if job is _STOP:
            break
        if job is _TOGGLE:
            reading = shared if reading is own else own
            toggled.release()
            continue
        payload, shared_arrays, callback_id = job
        results.put((*run(payload, shared_arrays), callback_id, thread_id))


def _job_runner(thread_id: int, serialization: str, package_path: str) -> Callable[..., tuple]:
    """run(payload, shared arrays) -> (ok, result payload or message, shared arrays), in this
    thread's runtime; a runtime that failed to start answers every job with why."""
    try:
        b = bridge()
        # a worker allocates the same sizes job after job (a loader's samples): keeping released
        # buffers from 64 KiB up for reuse spares the mmap, page faults and munmap of each new
        # one, which also stall the other threads of the process
        b.buffers.POOL_MIN = WORKER_POOL_MIN
        worker = b.module("threads.worker")
        b.call(worker.start, thread_id, serialization, package_path)
    except Exception as e:   # noqa: BLE001 - any failure must reach the main thread as the job's error
        message = f"thread {thread_id} could not start: {e}"
        return lambda payload, arrays: (False, message, [])

    def run(payload: np.ndarray, arrays: list[np.ndarray]) -> tuple:
        try:
            ok, out, *out_shared = b.call(worker.run, _describe(b, [payload]), _describe(b, arrays))
            if not ok:
                return False, str(out), []
            return True, _array_of(b, out), _arrays_of(b, out_shared[0])
        except Exception as e:   # noqa: BLE001 - as above: an error, never a lost job
            return False, f"{type(e).__name__}: {e}", []
    return run


def _run_thread(code: str) -> None:
    """threads.Thread's body: code in a runtime of its own; an error is printed, as torch7's."""
    try:
        b = bridge()
        b.call(b.load(code, "=(thread)"))
    except Exception as e:   # noqa: BLE001 - nothing to raise to: the thread ends here
        print(f"threads.Thread: {e}", file=sys.stderr)


def _close_pools() -> None:
    for pool in list(_live_pools):
        pool.close()


atexit.register(_close_pools)


def callbacks(b: "Bridge") -> dict[str, Any]:
    """What lua/threads calls: pools, jobs and results, threads, and shared handles."""

    def pool_new(n: int, serialization: str, package_path: str) -> Pool:
        return Pool(int(n), serialization, package_path)

    def addjob(pool: Pool, index: int, payload: Any, shared: Any, callback_id: int) -> None:
        arrays = _arrays_of(b, shared)
        pool.put(int(index), (_array_of(b, payload), arrays, callback_id))

    def dojob(pool: Pool) -> tuple:
        """The next result (waiting for one): ok, then the payload's and the shared storages'
        descriptions (or the error message), the endcallback's id and the worker's id."""
        ok, out, arrays, callback_id, thread_id = pool.results.get()
        if not ok:
            return False, out, None, callback_id, thread_id
        return True, _describe(b, [out]), _describe(b, arrays), callback_id, thread_id

    def handle(nbytes: int | None, address: int | None) -> Any:
        """Shared memory for a Mutex, Condition or AtomicCounter: new (nbytes zeroed bytes), or
        the one at address (None when none is alive there). Returns its description."""
        with _handles_lock:
            if address is None:
                array = np.zeros(int(nbytes), dtype=np.uint8)
                _handles[_address(array)] = array
            else:
                array = _handles.get(int(address))
                if array is None:
                    return None
        return _describe(b, [array])

    def thread_new(code: str) -> threading.Thread:
        thread = threading.Thread(target=_run_thread, args=(code,), name="luabridge-thread", daemon=True)
        thread.start()
        return thread

    return {
        "threads_pool": pool_new,
        "threads_addjob": addjob,
        "threads_dojob": dojob,
        "threads_queued": lambda pool, index: pool.queued(int(index)),
        "threads_specific": lambda pool, flag: pool.set_specific(bool(flag)),
        "threads_close": lambda pool: pool.close(),
        "threads_handle": handle,
        "threads_thread": thread_new,
        "threads_join": lambda thread: thread.join(),
    }
