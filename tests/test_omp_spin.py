"""oneDNN's OpenMP workers and OpenBLAS's threads (lua/torch/backend/cpu/dnnl.lua, blas.lua): by
default the workers sleep at once after a pass (OMP_WAIT_POLICY=PASSIVE) and nothing is held;
with GOMP_SPINCOUNT set by the user they spin a while, and for that while (dnnl.teamSpinUntil)
OpenBLAS's products get no thread on their CPUs. Each case in a fresh process (libgomp reads its
environment when it loads)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

SCRIPT = r"""
import json, luabridge
luabridge.require('torch')
print(json.dumps(luabridge.execute('''
  local dnnl = require 'torch.backend.cpu.dnnl'
  local blas = require 'torch.backend.cpu.blas'
  local ffi = require 'ffi'
  pcall(ffi.cdef, 'int usleep(unsigned);')
  if not dnnl.available then return '{"available": false}' end
  blas.watchLoad = false
  torch.setnumthreads(2)
  local n = 128
  local a, c = torch.FloatTensor(n, n):fill(1), torch.FloatTensor(n, n)
  assert(dnnl.sgemm(false, false, n, n, n, a:data(), n, a:data(), n, 0, c:data(), n, 2))
  local right = blas.threadsFor(1e9, 1)
  local oneDNN = blas.threadsFor(1e9, 1, true)
  ffi.C.usleep(math.floor(dnnl.teamSpinSeconds * 1e6) + 20000)
  local later = blas.threadsFor(1e9, 1)
  return ('{"available": true, "spin": %g, "right": %d, "onednn": %d, "later": %d, "value": %g}'):format(
    dnnl.teamSpinSeconds, right, oneDNN, later, c[1][1])
''')))
"""


def run(env_extra: dict) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    env.update(env_extra)
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(json.loads(out.stdout.strip().splitlines()[-1]))


def test_default_workers_sleep_and_hold_nothing() -> None:
    got = run({})
    if not got["available"]:
        pytest.skip("needs oneDNN")
    assert got["spin"] == 0 and got["right"] == 2 and got["later"] == 2 and got["value"] == 128


def test_spinning_workers_hold_their_cpus_from_openblas() -> None:
    got = run({"GOMP_SPINCOUNT": "10000"})
    if not got["available"]:
        pytest.skip("needs oneDNN")
    assert got["spin"] == pytest.approx(2.5e-4)
    assert got["right"] == 1      # OpenBLAS, right after a 2-thread pass: the worker still spins
    assert got["onednn"] == 2     # the next oneDNN pass reuses the spinning team
    assert got["later"] == 2      # once the spin is over, OpenBLAS gets both CPUs again
    assert got["value"] == 128
