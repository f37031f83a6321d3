"""What the tests of worker-thread lifetimes run in a child process of their own (/proc counts of
one process's threads): tests/test_fusion_workers_lifetime.py, tests/test_stop_workers.py.

PRELUDE defines, in the child: tasks() (this process's threads), group(seed) (a large fused group
on 2 threads in the calling thread's runtime: its team has one worker), product(seed) (a product
on the calling thread's runtime's second-thread worker, gemm_async), settle(want) (waits for the
count to come down to want). run(source) runs PRELUDE + source under a deadline: its stdout."""
from __future__ import annotations

import sys

from processes import run_in_own_group

PRELUDE = r"""
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
    and it was split over threads.'''
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


def run(source: str, timeout: float = 240) -> str:
    r = run_in_own_group([sys.executable, "-c", PRELUDE + source], timeout=timeout)
    assert r.returncode == 0, f"exit {r.returncode}\nstdout:\n{r.stdout[-3000:]}\nstderr:\n{r.stderr[-3000:]}"
    return r.stdout
