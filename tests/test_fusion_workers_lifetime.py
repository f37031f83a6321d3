"""How long the workers of a runtime's thread team live (lua/luabridge/graph/fusion_threads.lua:
large fused CPU groups and the parallel loops run on them). They ended only when Python collected
their runtime: after their thread ended they waited for jobs until the next garbage collection
(with gc off, for ever). Now they end on fusion_threads.stop() (waiting for them), within a
second or two of their thread's end, and the process exits promptly with them parked. Threads
are counted in /proc/self/task. Each case runs in its own process under a deadline."""
from __future__ import annotations

import sys

import pytest

from processes import run_in_own_group

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts threads in /proc")

_PRELUDE = r"""
import gc, os, sys, threading, time
import numpy as np
import luabridge.tinyflow as tf
from luabridge.graph import Session, fusion_threads
from luabridge.core.runtime import bridge
SET = ("local torch = require 'torch'; require('torch.backend.cpu.blas').watchLoad = false; "
       "torch.setnumthreads(2)")

def tasks():
    return len(os.listdir('/proc/self/task'))

def group(seed):
    '''A large fused group on 2 threads in this thread's runtime: True when its values are right
    and it was split over threads.'''
    b = bridge(); b.call(b.load(SET, "=s"))
    before = fusion_threads.jobs()[0]
    x = tf.placeholder(tf.float32, name="x")
    z = tf.exp(tf.tanh(x * 0.5) + 1.0) * x
    xv = np.random.default_rng(seed).random(400003).astype(np.float32)
    r = Session("cpu fusion").run(z, {x: xv})
    return bool(np.allclose(r, np.exp(np.tanh(xv * 0.5) + 1) * xv, rtol=1e-5)) and fusion_threads.jobs()[0] > before

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


def test_stop_ends_the_workers_and_a_later_run_starts_new_ones() -> None:
    out = _py(r"""
base = tasks()
print('first', group(1), tasks() - base)
fusion_threads.stop()
print('after stop', settle(base, 5) - base)
fusion_threads.stop()   # again: nothing to stop
print('again', group(2), tasks() - base)
fusion_threads.stop()
print('end', settle(base, 5) - base)
""")
    assert "first True 1" in out, out
    # stop() joins them: gone on return, though their /proc/self/task entry can outlast the join
    # by a moment on a busy machine
    assert "after stop 0" in out, out
    assert "again True 1" in out, out
    assert "end 0" in out, out


def test_the_workers_of_a_thread_that_ended_end_without_a_collection() -> None:
    out = _py(r"""
gc.disable()   # the runtimes of the threads stay uncollected
base = tasks()
out = {}
def work(i):
    out[i] = group(i)
for rnd in range(2):
    ts = [threading.Thread(target=work, args=(rnd * 3 + i,)) for i in range(3)]
    [t.start() for t in ts]; [t.join() for t in ts]
print('values', sorted(out.values()) == [True] * 6)
print('left', settle(base) - base)
""")
    assert "values True" in out, out
    assert "left 0" in out, out


def test_a_thread_team_stays_while_its_thread_runs() -> None:
    """An idle team whose thread still runs keeps its workers (they look, and wait again)."""
    out = _py(r"""
base = tasks()
go, done = threading.Event(), threading.Event()
res = {}
def work():
    res['a'] = group(1)
    go.set()
    done.wait()
    res['b'] = group(2)   # the same workers
    res['runs'] = fusion_threads.jobs()
t = threading.Thread(target=work)
t.start()
go.wait()
time.sleep(2.5)   # past two of the workers' looks
print('while idle', tasks() - base)
done.set(); t.join()
print('values', res['a'], res['b'], res['runs'][0])
print('left', settle(base) - base)
""")
    assert "while idle 2" in out, out   # the thread and its worker
    assert "values True True 2" in out, out
    assert "left 0" in out, out


def test_the_process_exits_with_teams_parked() -> None:
    """Teams in the main runtime and in a daemon thread's runtime that still runs: the process
    exits at once, status 0, nothing on stderr."""
    r = run_in_own_group([sys.executable, "-c", _PRELUDE + r"""
print('main', group(1))
ready = threading.Event()
def idle():
    print('thread', group(2), flush=True)
    ready.set()
    time.sleep(3600)
threading.Thread(target=idle, daemon=True).start()
ready.wait()
"""], timeout=120)
    assert r.returncode == 0 and "main True" in r.stdout and "thread True" in r.stdout, r
    assert r.stderr == "", r.stderr
