"""luabridge.stop_workers(): the calling thread's runtime ends every team of worker threads it
started (lua/threads/pthread.lua's register: fusion_threads' team for fused groups and parallel
loops, gemm_async's second-thread product worker) and waits for them; the runtime stays usable
and starts new ones. The second-thread worker also ends by itself once its runtime's thread has
ended, as the fused groups' team does. Threads are counted in /proc/self/task; each case runs in
its own process under a deadline."""
from __future__ import annotations

import sys

import pytest

from processes import run_in_own_group

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts threads in /proc")

_PRELUDE = r"""
import gc, os, sys, threading, time
import numpy as np
import luabridge
import luabridge.tinyflow as tf
from luabridge.graph import Session, fusion_threads
from luabridge.core.runtime import bridge
SET = ("local torch = require 'torch'; require('torch.backend.cpu.blas').watchLoad = false; "
       "torch.setnumthreads(2)")

def tasks():
    return len(os.listdir('/proc/self/task'))

def group(seed):
    '''A large fused group on 2 threads in this thread's runtime: True when its values are right
    and it was split over threads (the team has one worker).'''
    b = bridge(); b.call(b.load(SET, "=s"))
    before = fusion_threads.jobs()[0]
    x = tf.placeholder(tf.float32, name="x")
    z = tf.exp(tf.tanh(x * 0.5) + 1.0) * x
    xv = np.random.default_rng(seed).random(400003).astype(np.float32)
    r = Session("cpu fusion").run(z, {x: xv})
    return bool(np.allclose(r, np.exp(np.tanh(xv * 0.5) + 1) * xv, rtol=1e-5)) and fusion_threads.jobs()[0] > before

POST = '''function(seed)
  local torch = require 'torch'
  local async = require 'torch.backend.cpu.gemm_async'
  if not require('torch.backend.cpu.dnnl').available then return 'no oneDNN' end
  async.enabled = true
  torch.manualSeed(seed)
  local a, b = torch.FloatTensor(40, 30):uniform(-1, 1), torch.FloatTensor(30, 20):uniform(-1, 1)
  local c = torch.FloatTensor(40, 20):zero()
  local posted = async.post(false, false, 40, 20, 30, 1, a:data(), 30, b:data(), 20, 0, c:data(), 20)
  async.wait()
  async.enabled = false
  return posted and (c - torch.mm(a, b)):abs():max() < 1e-4
end'''

def product(seed):
    '''A product on the second-thread worker of this thread's runtime (started on the first):
    True when posted and right, or 'no oneDNN'.'''
    return luabridge.eval(POST)(seed)

def settle(want, seconds=30):
    deadline = time.monotonic() + seconds
    while tasks() > want and time.monotonic() < deadline:
        time.sleep(0.05)
    return tasks()
"""


def _py(source: str, timeout: float = 240) -> str:
    r = run_in_own_group([sys.executable, "-c", _PRELUDE + source], timeout=timeout)
    assert r.returncode == 0, f"exit {r.returncode}\nstdout:\n{r.stdout[-3000:]}\nstderr:\n{r.stderr[-3000:]}"
    return r.stdout


def test_stop_workers_ends_every_team_of_the_runtime_and_it_stays_usable() -> None:
    out = _py(r"""
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
    out = _py(r"""
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


def test_the_product_worker_of_a_thread_that_ended_ends_without_a_collection() -> None:
    """Before, the second-thread worker waited for jobs until Python collected its runtime (with
    gc off, for ever); now it looks whether its runtime's thread still runs, as the fused groups'
    team does."""
    out = _py(r"""
gc.disable()   # the runtimes of the threads stay uncollected
base = tasks()
res = []
def work(i):
    res.append(product(i))
ts = [threading.Thread(target=work, args=(i,)) for i in range(3)]
[t.start() for t in ts]; [t.join() for t in ts]
if 'no oneDNN' in res:
    print('SKIP no oneDNN'); sys.exit(0)
print('values', res == [True] * 3)
print('left', settle(base) - base)
""")
    if "SKIP no oneDNN" in out:
        pytest.skip("needs oneDNN (the product worker runs dnnl_sgemm)")
    assert "values True" in out, out
    assert "left 0" in out, out
