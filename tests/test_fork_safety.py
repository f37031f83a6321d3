"""Forked children and the pools luabridge keeps in Python: a child forked while another thread
of its parent held a pool's lock, or after the pool's workers started (they are not in the child),
runs its threaded passes and exits (multiprocessing's fork start method, a threads-style fork,
Ray's workers). Each case runs in its own process under a deadline: a hang fails, not waits."""
from __future__ import annotations

import sys

from processes import AWAIT_CHILD, run_in_own_group

# hold(): a thread of this process takes blocked.py's pool lock and keeps it until the function
# hold() returns is called (which joins the thread).
_HOLD = r"""
import threading
from luabridge.providers.torch_cpu import blocked
def hold():
    held, release = threading.Event(), threading.Event()
    def holder():
        with blocked._pool_lock:
            held.set()
            release.wait()
    t = threading.Thread(target=holder)
    t.start()
    held.wait()
    def let_go():
        release.set()
        t.join()
    return let_go
"""

# A child forked while a thread of the parent holds the lock; prints "child exit N" or "child
# hung". The child leaves through the interpreter's normal exit (atexit joins the executor
# threads it knows of).
_FORK_WHILE_HELD = _HOLD + AWAIT_CHILD + r"""
import os, sys
import numpy as np
prog = blocked.Program("x = x * k", ["x"], ["k"])
a = np.ones(1 << 20)
blocked.run_program(prog, "Double", a.size, 2, [a.ctypes.data], [2.0])   # the parent's pool
let_go = hold()
pid = os.fork()
if pid == 0:
    blocked.run_program(prog, "Double", a.size, 2, [a.ctypes.data], [3.0])
    sys.exit(0 if np.all(a == 6.0) else 1)
let_go()
await_child(pid, 60)
print("parent", bool(np.all(a == 2.0)))
"""


def _py(source: str) -> str:
    r = run_in_own_group([sys.executable, "-c", source], timeout=240)
    assert r.returncode == 0, f"exit {r.returncode}\nstdout:\n{r.stdout[-3000:]}\nstderr:\n{r.stderr[-3000:]}"
    return r.stdout


def test_a_child_forked_while_a_thread_held_the_pool_lock_runs_and_exits() -> None:
    """The child's copy of a lock another thread held at the fork stays held: its first threaded
    run waited for ever. The child now starts with a fresh lock and no pool."""
    out = _py(_FORK_WHILE_HELD)
    assert "child exit 0" in out and "parent True" in out, out


def test_multiprocessing_fork_workers_run_lua_programs_on_two_threads() -> None:
    """torch.elementwise on 2 threads in the parent, then in multiprocessing's fork workers (made
    while a parent thread held the pool's lock), then in the parent again: the same values, and
    the pool's workers end with close()/join() (no hang at the workers' exit)."""
    out = _py(_HOLD + r"""
import multiprocessing as mp
import numpy as np
import luabridge
RUN = '''(function()
  require 'torch'
  require('torch.backend.cpu.blas').watchLoad = false
  torch.setnumthreads(2)
  return function(k)
    local x = torch.DoubleTensor(1200000):fill(1)
    local ran = torch.elementwise('x = x * k + 1', { x = x }, { k = k })
    return tostring(ran) .. ' ' .. x:sum()
  end
end)()'''
f = luabridge.eval(RUN)
def work(k):
    import os
    return f(k), blocked._pool_pid == os.getpid()   # the child's own pool ran it
if __name__ == '__main__':
    parent = f(2.0)
    let_go = hold()
    ctx = mp.get_context('fork')
    pool = ctx.Pool(2)
    let_go()
    res = pool.map_async(work, [2.0, 3.0, 4.0])
    print('children', res.get(timeout=120))
    pool.close()
    pool.join()
    print('parent', parent, f(2.0))
""")
    assert "children [('true 3600000', True), ('true 4800000', True), ('true 6000000', True)]" in out, out
    assert "parent true 3600000 true 3600000" in out, out
