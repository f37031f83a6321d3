"""The memory passes of a training step that ran on one thread (docs/performance.md, "Serial
fractions, pass by pass"): zeroing a large contiguous tensor (grads:zero(), pointwise.lua's fill
over torch.backend.cpu.parallel's team) and BLAS's axpy (params:add(-lr, grads), a training
plan's gradient accumulation; blas.minWork.axpy) on 2 threads.

Each runs on the old path (one thread: zeroThreads.least / minWork.axpy = math.huge, or
parallel.enabled = false) and on the threaded one, with thresholds lowered so that small and odd
sizes split too: the values must be the same bit for bit, and equal to numpy's (zeros; float64
y + a x rounded to the type), and memory next to a zeroed view must stay as it was."""
from __future__ import annotations

import numpy as np
import pytest

import luabridge

ZERO = """
local x, first, count, threads, least, loopsOn = ...
local blas = require 'torch.backend.cpu.blas'
local parallel = require 'torch.backend.cpu.parallel'
local zt = require('torch.backend.cpu.pointwise').zeroThreads
local saved = { blas.watchLoad, torch.getnumthreads(), parallel.enabled, zt.least }
blas.watchLoad, parallel.enabled, zt.least = false, loopsOn, least
torch.setnumthreads(threads)
local ok, err = pcall(function()
  local runs = zt.runs
  x:narrow(1, first, count):zero()
  return zt.runs - runs
end)
blas.watchLoad, parallel.enabled, zt.least = saved[1], saved[3], saved[4]
torch.setnumthreads(saved[2])
if not ok then error(err, 0) end
return err
"""

AXPY = """
local y, x, alpha, threads, least = ...
local blas = require 'torch.backend.cpu.blas'
local saved = { blas.watchLoad, torch.getnumthreads(), blas.minWork.axpy }
blas.watchLoad, blas.minWork.axpy = false, least
torch.setnumthreads(threads)
local ok, err = pcall(function()
  local n = y:nElement()
  local split = blas.threadsFor(n, blas.minWork.axpy)
  y:add(alpha, x)
  return split
end)
blas.watchLoad, blas.minWork.axpy = saved[1], saved[3]
torch.setnumthreads(saved[2])
if not ok then error(err, 0) end
return err
"""

HUGE = float("inf")


def _run(code, *args):
    luabridge.require("torch")
    return luabridge.runtime().execute(code, *args)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.uint8])
@pytest.mark.parametrize("n,first,count", [(100_003, 1, 100_003), (250_001, 17, 200_000), (64, 3, 50)])
def test_zero_threaded_matches_serial(dtype, n, first, count):
    rng = np.random.default_rng(n)
    base = (rng.random(n) * 100 + 1).astype(dtype)
    results = {}
    # (threads, least bytes a thread, parallel loops on)
    for key in [(1, HUGE, True), (2, HUGE, True), (2, 4096.0, False), (1, 4096.0, True), (2, 4096.0, True),
                (2, 1000.0, True)]:
        t = luabridge.from_numpy(base.copy())
        runs = _run(ZERO, t, first, count, key[0], key[1], key[2])
        got = luabridge.to_numpy(t)
        want = base.copy()
        want[first - 1:first - 1 + count] = 0
        np.testing.assert_array_equal(got, want)   # zeros inside, untouched outside
        split = key[0] == 2 and key[2] and count * base.itemsize >= 2 * key[1]
        assert runs == (1 if split else 0), (key, runs)
        results[key] = got
    first_result = next(iter(results.values()))
    for got in results.values():
        assert got.tobytes() == first_result.tobytes()


def test_zero_default_threshold_splits_resnet_gradients_only():
    """From 8 MiB (2 x zeroThreads.least) on 2 threads: ResNet-18's 47 MB of gradients split,
    the MLP's 2.7 MB do not."""
    for n, split in [(11_689_512 // 4, True), (669_706, False)]:
        t = luabridge.from_numpy(np.ones(n, dtype=np.float32))
        runs = _run(ZERO.replace("zt.least = false, loopsOn, least", "zt.least = false, loopsOn, zt.least"),
                    t, 1, n, 2, 0.0, True)
        assert runs == (1 if split else 0)
        assert not luabridge.to_numpy(t).any()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 1000, 100_001, 1_000_003])
def test_axpy_threaded_matches_serial_and_numpy(dtype, n):
    rng = np.random.default_rng(7 + n)
    y0 = rng.standard_normal(n).astype(dtype)
    x = rng.standard_normal(n).astype(dtype)
    alpha = -0.0137
    want = (y0.astype(np.float64) + np.float64(dtype(alpha)) * x.astype(np.float64))
    outs = {}
    for threads, least in [(1, HUGE), (2, HUGE), (2, 100.0), (2, 5e5)]:
        y = luabridge.from_numpy(y0.copy())
        split = _run(AXPY, y, luabridge.from_numpy(x), alpha, threads, least)
        assert split == (2 if threads == 2 and n >= 2 * least else 1)
        got = luabridge.to_numpy(y)
        tol = 4e-7 if dtype == np.float32 else 1e-15
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
        outs[(threads, least)] = got
    ref = outs[(1, HUGE)]
    for got in outs.values():
        assert got.tobytes() == ref.tobytes()


STEP = """
local threads, threaded = ...
require 'nn'
local blas = require 'torch.backend.cpu.blas'
local zt = require('torch.backend.cpu.pointwise').zeroThreads
local saved = { blas.watchLoad, torch.getnumthreads(), blas.minWork.axpy, zt.least }
blas.watchLoad = false
if threaded then blas.minWork.axpy, zt.least = 64, 256 else blas.minWork.axpy, zt.least = math.huge, math.huge end
torch.setnumthreads(threads)
local ok, a, b, c = pcall(function()
  torch.manualSeed(3)
  local model = nn.Sequential()
    :add(nn.SpatialConvolution(3, 16, 3, 3, 1, 1, 1, 1)):add(nn.SpatialBatchNormalization(16)):add(nn.ReLU(true))
    :add(nn.SpatialConvolution(16, 16, 3, 3, 1, 1, 1, 1)):add(nn.SpatialBatchNormalization(16)):add(nn.ReLU(true))
    :add(nn.View(16 * 8 * 8)):add(nn.Linear(16 * 8 * 8, 10)):float()
  model:training()
  local x = torch.FloatTensor(4, 3, 8, 8):normal()
  local y = torch.LongTensor(4):random(1, 10)
  local crit = nn.CrossEntropyCriterion():float()
  local params, grads = model:getParameters()
  local before
  for _ = 1, 3 do
    grads:zero()
    local out = model:forward(x)
    crit:forward(out, y)
    model:backward(x, crit:backward(out, y))
    before = params:clone()
    params:add(-0.1, grads)
  end
  return before, params:clone(), grads:clone()
end)
blas.watchLoad, blas.minWork.axpy, zt.least = saved[1], saved[3], saved[4]
torch.setnumthreads(saved[2])
if not ok then error(a, 0) end
return a, b, c
"""


def test_training_steps_same_on_both_paths():
    """Three SGD steps of a small conv net (planned where oneDNN is present: its gradients come
    through the plan's axpy accumulation) give the same parameters and gradients bit for bit with
    the threaded zeroing and axpy as with both on one thread (2 threads each); the last update
    equals p - 0.1 g in float64, rounded to float32."""
    runs = {}
    for threads, threaded in [(1, False), (2, False), (2, True)]:
        before, p, g = (luabridge.to_numpy(t) for t in _run(STEP, threads, threaded))
        want = before.astype(np.float64) - np.float64(np.float32(0.1)) * g.astype(np.float64)
        np.testing.assert_allclose(p, want, rtol=4e-7, atol=1e-9)
        runs[(threads, threaded)] = (before, p, g)
    ref = runs[(2, False)]
    got = runs[(2, True)]
    for a, b in zip(ref, got):
        assert a.tobytes() == b.tobytes()
    assert np.isfinite(got[1]).all() and np.abs(got[2]).sum() > 0
    # the 1-thread run differs only by oneDNN's and BLAS's thread-count reductions
    np.testing.assert_allclose(runs[(1, False)][1], got[1], rtol=1e-4, atol=1e-5)
