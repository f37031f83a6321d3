"""luabridge.stop_workers(): the calling thread's runtime ends every team of worker threads it
started (lua/threads/pthread.lua's register: fusion_threads' team for fused groups and parallel
loops, gemm_async's second-thread product worker) and waits for them; the runtime stays usable
and starts new ones (that a worker ends by itself once its runtime's thread has ended:
tests/test_fusion_workers_lifetime.py). Threads are counted in /proc/self/task; each case runs in
its own process under a deadline."""
from __future__ import annotations

import sys

import pytest

from worker_lifetimes import run

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts threads in /proc")


def test_stop_workers_ends_every_team_of_the_runtime_and_it_stays_usable() -> None:
    out = run(r"""
luabridge.stop_workers()   # no runtime yet: makes none, stops nothing
base = tasks()
gemm = product(1)
if gemm == 'no oneDNN':
    print('SKIP no oneDNN'); sys.exit(0)
print('started', group(1), gemm, tasks() - base)   # the fused groups' worker and the product worker
luabridge.stop_workers()
# joined on return; a /proc/self/task entry can outlast the join by a moment on a busy machine
print('after stop', settle(base, 5) - base)
luabridge.stop_workers()   # again: nothing left to stop
print('again', group(2), product(2), tasks() - base)
luabridge.stop_workers()
print('end', settle(base, 5) - base)
""")
    if "SKIP no oneDNN" in out:
        pytest.skip("needs oneDNN (the product worker runs dnnl_sgemm)")
    assert "started True True 2" in out, out
    assert "after stop 0" in out, out
    assert "again True True 2" in out, out
    assert "end 0" in out, out


def test_stop_workers_acts_on_the_calling_threads_runtime_only() -> None:
    out = run(r"""
base = tasks()
print('main', group(1), tasks() - base)   # the main runtime's worker
go, done = threading.Event(), threading.Event()
res = {}
def work():
    res['group'] = group(2)
    res['with'] = tasks() - base   # this thread, its worker, the main's worker
    luabridge.stop_workers()
    res['without'] = settle(base + 2, 5) - base   # this thread and the main's worker
    go.set(); done.wait()
t = threading.Thread(target=work)
t.start(); go.wait()
print('thread', res['group'], res['with'], res['without'])
done.set(); t.join()
print('main still', settle(base + 1, 5) - base, group(3))
luabridge.stop_workers()
print('end', settle(base, 5) - base)
""")
    assert "main True 1" in out, out
    assert "thread True 3 2" in out, out
    assert "main still 1 True" in out, out
    assert "end 0" in out, out
