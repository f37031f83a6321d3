"""Max pooling's passes on several threads (lua/torch/backend/cpu/parallel.lua over
fusion_threads.lua's team): the forward loops (generated per geometry, and the general ones), the
indices pass after oneDNN's forward, and the backward scatter, split over chunks of planes.

Every geometry runs on the loops as they were (parallel.enabled = false) and on the threaded
ones at 1 and 2 threads (BLAS's free-CPU check off, so that 2 threads really run): output,
torch7's `indices` and gradInput must be the same bit for bit, and equal to a numpy float64
reference written from torch7's rules (test_nn_conv_pool.pool_ref; gradInput: each output's
gradient added at its index)."""
from __future__ import annotations

import numpy as np
import pytest

import luabridge
from nn_conv_helpers import N, T
from test_nn_conv_pool import pool_ref

RUN = """
local spec, x, go, threaded, threads, dnnlOn, double = ...
require 'nn'
local blas = require 'torch.backend.cpu.blas'
local parallel = require 'torch.backend.cpu.parallel'
local dnnl = require 'torch.backend.cpu.dnnl'
local saved = { blas.watchLoad, torch.getnumthreads(), parallel.enabled, dnnl.enabled }
blas.watchLoad, parallel.enabled = false, threaded
dnnl.enabled = dnnlOn and saved[4]
torch.setnumthreads(threads)
local ok, a, b, c, d = pcall(function()
  local m = loadstring('return ' .. spec)()
  if double then m:double(); x, go = x:double(), go:double() else m:float(); x, go = x:float(), go:float() end
  local runs = parallel.runs
  local out = m:forward(x):clone()
  local ix = m.indices:clone()
  local gi = m:backward(x, go):clone()
  return out, ix, gi, parallel.runs - runs
end)
blas.watchLoad, parallel.enabled, dnnl.enabled = saved[1], saved[3], saved[4]
torch.setnumthreads(saved[2])
if not ok then error(a, 0) end
return a, b, c, d
"""

# (kW, kH, dW, dH, padW, padH, ceil), input size (B, C, H, W; B = 0: one 3D sample)
CASES = [
    ((2, 2, 2, 2, 0, 0, False), (64, 20, 24, 24)),   # LeNet's first pooling (unrolled rows, tiled)
    ((2, 2, 2, 2, 0, 0, False), (64, 50, 8, 8)),     # LeNet's second (unrolled backward)
    ((3, 3, 2, 2, 1, 1, False), (2, 64, 112, 112)),  # ResNet's (oneDNN forward + indices pass)
    ((3, 3, 2, 2, 1, 1, True), (3, 16, 33, 35)),     # ceil mode with padding
    ((3, 2, 2, 1, 1, 1, True), (2, 40, 29, 30)),
    ((2, 3, 3, 2, 0, 1, False), (0, 300, 25, 31)),   # one 3D sample
    ((3, 3, 1, 1, 0, 0, False), (4, 40, 20, 20)),    # overlapping windows, unrolled forward
    ((2, 2, 2, 2, 0, 0, False), (5, 37, 7, 9)),      # odd sizes: windows leave a row unread
    ((5, 5, 3, 3, 2, 2, True), (2, 48, 40, 40)),
]


def _spec(p):
    kW, kH, dW, dH, pW, pH, ceil = p
    return f"nn.SpatialMaxPooling({kW}, {kH}, {dW}, {dH}, {pW}, {pH})" + (":ceil()" if ceil else "")


def _grad_ref(go, idx, plane_shape):
    """gradInput in float64: each output's gradient added at its 1-based index in its plane."""
    P = go.shape[0]
    gi = np.zeros((P, int(np.prod(plane_shape))))
    flat_go, flat_ix = go.reshape(P, -1), idx.reshape(P, -1) - 1
    for p in range(P):
        np.add.at(gi[p], flat_ix[p], flat_go[p])
    return gi.reshape((P, *plane_shape))


def _runner(lua):
    return lua.eval(f"loadstring([==[{RUN}]==])")


def _run(lua, spec, x, go, threaded, threads, dnnl=True, double=False):
    out, ix, gi, runs = _runner(lua)(spec, T(x), T(go), threaded, threads, dnnl, double)
    return N(out), N(ix), N(gi), runs


@pytest.mark.parametrize("dnnl", [True, False])
@pytest.mark.parametrize("p, size", CASES)
def test_threaded_max_pooling_equals_serial_and_numpy(lua, rng, p, size, dnnl):
    B, C, H, W = size
    shape = (C, H, W) if B == 0 else (B, C, H, W)
    x = rng.standard_normal(shape).astype(np.float32)
    kW, kH, dW, dH, pW, pH, ceil = p
    planes = x.reshape(-1, H, W).astype(np.float64)
    want, widx = pool_ref(planes, (kH, kW), (dH, dW), (pH, pW), ceil=ceil)
    go = rng.standard_normal(want.shape).astype(np.float32)
    want_gi = _grad_ref(go.astype(np.float64), widx, (H, W))
    go_in = go.reshape(shape[:-2] + want.shape[1:])
    spec = _spec(p)
    serial = _run(lua, spec, x, go_in, False, 1, dnnl)
    assert serial[3] == 0
    np.testing.assert_array_equal(serial[0].reshape(want.shape), want.astype(np.float32))
    np.testing.assert_array_equal(serial[1].reshape(want.shape), widx)
    np.testing.assert_allclose(serial[2].reshape(want_gi.shape), want_gi, rtol=1e-6, atol=1e-6)
    big = planes.size >= 2 * 32768
    for threads in (1, 2):
        got = _run(lua, spec, x, go_in, True, threads, dnnl)
        for a, b in zip(serial[:3], got[:3]):
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_array_equal(a, b)   # bit for bit (signed zeros and NaNs aside: none here)
            assert a.tobytes() == b.tobytes()
        if threads == 2 and big:
            assert got[3] >= 1, "no pass ran on threads"
        if threads == 1:
            assert got[3] == 0


@pytest.mark.parametrize("batch, runs", [(64, 1), (256, 3)])
def test_unrolled_backward_on_threads_only_from_its_least(lua, rng, batch, runs):
    # LeNet's second pooling: the forward splits at both batches; the unrolled backward (and the
    # indices check) only at 256 (nn_pool.lua's UNROLLED_BACK_LEAST: at 64 a worker's wake-up
    # cost more than the half pass); values as the serial loops', bit for bit, and numpy's
    x = rng.standard_normal((batch, 50, 8, 8)).astype(np.float32)
    want, widx = pool_ref(x.reshape(-1, 8, 8).astype(np.float64), (2, 2), (2, 2), (0, 0))
    go = rng.standard_normal(want.shape).astype(np.float32)
    want_gi = _grad_ref(go.astype(np.float64), widx, (8, 8))
    spec = _spec((2, 2, 2, 2, 0, 0, False))
    serial = _run(lua, spec, x, go.reshape(batch, 50, 4, 4), False, 1)
    got = _run(lua, spec, x, go.reshape(batch, 50, 4, 4), True, 2)
    assert got[3] == runs
    np.testing.assert_allclose(got[2].reshape(want_gi.shape), want_gi, rtol=1e-6, atol=1e-6)
    for a, b in zip(serial[:3], got[:3]):
        assert a.tobytes() == b.tobytes()


@pytest.mark.parametrize("double", [False, True])
def test_threaded_max_pooling_double_and_noncontiguous(lua, rng, double):
    # a transposed (non-contiguous) batch: the module pools its contiguous copy
    x = rng.standard_normal((12, 60, 26, 8)).astype(np.float64 if double else np.float32)
    xt = lua.eval("function(t) return t:transpose(1, 4) end")(T(x))
    assert not lua.eval("function(t) return t:isContiguous() end")(xt)
    planes = np.ascontiguousarray(x.transpose(3, 1, 2, 0)).reshape(-1, 26, 12)   # (8, 60, 26, 12)
    want, widx = pool_ref(planes, (2, 3), (2, 1), (1, 0), ceil=True)
    go = rng.standard_normal(want.shape)
    want_gi = _grad_ref(go, widx, (26, 12))
    spec = "nn.SpatialMaxPooling(3, 2, 1, 2, 0, 1):ceil()"
    run = _runner(lua)
    results = []
    for threaded, threads in ((False, 1), (True, 1), (True, 2)):
        out, ix, gi, runs = run(spec, xt, T(go.reshape(8, 60, *want.shape[1:])), threaded, threads, True, double)
        assert runs == (2 if threads == 2 else 0)
        results.append((N(out), N(ix), N(gi)))
    for r in results:
        np.testing.assert_array_equal(r[0].reshape(want.shape), want.astype(r[0].dtype))
        np.testing.assert_array_equal(r[1].reshape(want.shape), widx)
        tol = 1e-12 if double else 1e-5
        np.testing.assert_allclose(r[2].reshape(want_gi.shape), want_gi, rtol=tol, atol=tol)
        for a, b in zip(results[0], r):
            assert a.tobytes() == b.tobytes()


def test_threaded_max_pooling_nan_and_inf_windows(lua, rng):
    # torch7's rules survive the split: a NaN tap wins, a window of -inf gives -inf at its first tap
    x = rng.standard_normal((8, 40, 12, 12)).astype(np.float32)
    x[0, 0, 0, 0] = np.nan
    x[1, 3, 2:4, 2:4] = -np.inf
    x[7, 39, 4, 5] = np.inf
    go = rng.standard_normal((8, 40, 6, 6)).astype(np.float32)
    run = _runner(lua)
    base = [N(t) for t in run("nn.SpatialMaxPooling(2, 2, 2, 2)", T(x), T(go), False, 1, True, False)[:3]]
    assert np.isnan(base[0][0, 0, 0, 0]) and base[0][1, 3, 1, 1] == -np.inf and base[0][7, 39, 2, 2] == np.inf
    assert base[1][1, 3, 1, 1] == 2 * 12 + 2 + 1
    for threads in (1, 2):
        got = [N(t) for t in run("nn.SpatialMaxPooling(2, 2, 2, 2)", T(x), T(go), True, threads, True, False)[:3]]
        for a, b in zip(base, got):
            assert a.tobytes() == b.tobytes()


CHANGED_INDICES = """
local threads = ...
require 'nn'
local blas = require 'torch.backend.cpu.blas'
local saved = { blas.watchLoad, torch.getnumthreads() }
blas.watchLoad = false
torch.setnumthreads(threads)
local m = nn.SpatialMaxPooling(2, 2, 2, 2):float()
local x = torch.FloatTensor(128, 20, 24, 24):normal()
local go = m:forward(x):clone():normal()
local parallel = require 'torch.backend.cpu.parallel'
local runs = parallel.runs
-- the first chunk's and the last one's (a worker's, on 2 threads)
m.indices[{ 3, 4, 5, 6 }] = 24 * 24 + 1
local ok, err = pcall(function() return m:backward(x, go) end)
m.indices[{ 3, 4, 5, 6 }] = 1
m.indices[{ 127, 4, 5, 6 }] = 0
local ok2, err2 = pcall(function() return m:backward(x, go) end)
m.indices[{ 127, 4, 5, 6 }] = 24 * 24
local ok3 = pcall(function() return m:backward(x, go) end)
blas.watchLoad = saved[1]
torch.setnumthreads(saved[2])
return ok, tostring(err), ok2, tostring(err2), ok3, parallel.runs - runs
"""


@pytest.mark.parametrize("threads", [1, 2])
def test_changed_indices_raise_before_writing(lua, threads):
    ok, err, ok2, err2, ok3, runs = lua.eval(f"loadstring([==[{CHANGED_INDICES}]==])")(threads)
    assert not ok and "nn.SpatialMaxPooling: indices outside 1..576" in err
    assert not ok2 and "nn.SpatialMaxPooling: indices outside 1..576" in err2
    assert ok3   # in range again: the backward runs
    if threads == 2:
        assert runs >= 3   # the checks ran on threads


LOOP = """
local threads, n = ...
require 'torch'
local ffi = require 'ffi'
local blas = require 'torch.backend.cpu.blas'
local parallel = require 'torch.backend.cpu.parallel'
local dtype = require 'torch.core.dtype'
local saved = { blas.watchLoad, torch.getnumthreads() }
blas.watchLoad = false
torch.setnumthreads(threads)
local src = [[
return function(lo, hi, out, scale, fail)
  for i = lo, hi - 1 do
    if i == fail then error('item ' .. i .. ' failed') end
    out[i] = i * scale
  end
end]]
local loop = parallel.loop('test loop', src, { 'T *', 'number', 'number' })[dtype.Double]
local out = ffi.new('double[?]', n)
local ft = require 'luabridge.graph.fusion_threads'
local results = {}
-- a worker runs chunks (retried: a worker that wakes late leaves them all to this thread)
local helped0 = select(2, ft.runs())
for _ = 1, 200 do
  loop(threads, n, out, 3, -1)
  if select(2, ft.runs()) > helped0 then break end
end
results.helped = select(2, ft.runs()) > helped0
local bad = 0
for i = 0, n - 1 do if out[i] ~= 3 * i then bad = bad + 1 end end
results.bad = bad
-- an error in a chunk (this thread's or a worker's) reaches the caller
local errors = {}
for _ = 1, 20 do
  local ok, err = pcall(loop, threads, n, out, 3, n - 1)
  errors[#errors + 1] = tostring(err)
  assert(not ok)
end
results.err = table.concat(errors, '\\n')
local ok, err = pcall(loop, threads, n, out, 'three', -1)
results.typeErr = tostring(err)
blas.watchLoad = saved[1]
torch.setnumthreads(saved[2])
return results.helped, results.bad, results.err, results.typeErr
"""


def test_parallel_loop_runs_every_item_once_and_reports_errors(lua):
    helped, bad, err, type_err = lua.eval(f"loadstring([==[{LOOP}]==])")(2, 100003)
    assert helped, "no worker ran a chunk"
    assert bad == 0
    for line in err.split("\n"):
        assert "item 100002 failed" in line
    assert "test loop: argument 2 is a string, not a number" in type_err


CONV = """
local spec, x, go, split, threads = ...
require 'nn'
local blas = require 'torch.backend.cpu.blas'
local parallel = require 'torch.backend.cpu.parallel'
local conv = require 'torch.backend.cpu.nn_conv'
local saved = { blas.watchLoad, torch.getnumthreads(), conv.splitBatch }
blas.watchLoad, conv.splitBatch = false, split
torch.setnumthreads(threads)
local ok, a, b, c, d = pcall(function()
  torch.manualSeed(7)
  local m = loadstring('return ' .. spec)():float()
  m:zeroGradParameters()
  local runs = parallel.runs
  local out = m:forward(x):clone()
  m:accGradParameters(x, go, 0.5)
  return out, m.gradWeight:clone(), m.gradBias:clone(), parallel.runs - runs
end)
blas.watchLoad, conv.splitBatch = saved[1], saved[3]
torch.setnumthreads(saved[2])
if not ok then error(a, 0) end
return a, b, c, d
"""


def _conv_ref(x, w, bias, stride, pad):
    """float64 convolution (B, C, H, W) * (O, C, kH, kW) and its patches (for the gradients)."""
    B, C, H, W = x.shape
    O, _, kH, kW = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    oH, oW = (H + 2 * pad[0] - kH) // stride[0] + 1, (W + 2 * pad[1] - kW) // stride[1] + 1
    cols = np.empty((B, C, kH, kW, oH, oW))
    for i in range(kH):
        for j in range(kW):
            cols[:, :, i, j] = xp[:, :, i:i + stride[0] * oH:stride[0], j:j + stride[1] * oW:stride[1]]
    cols = cols.reshape(B, C * kH * kW, oH * oW)
    out = np.einsum("ok,bkn->bon", w.reshape(O, -1), cols) + bias[None, :, None]
    return out.reshape(B, O, oH, oW), cols


# (C, O, kW, kH, dW, dH, padW, padH), input (B, H, W): first layers of few input channels
CONV_CASES = [
    ((1, 20, 5, 5, 1, 1, 0, 0), (64, 28, 28)),    # LeNet's first convolution
    ((1, 6, 5, 5, 1, 1, 2, 2), (40, 32, 32)),
    ((3, 20, 3, 5, 2, 1, 1, 2), (48, 17, 19)),
]


@pytest.mark.parametrize("case, size", CONV_CASES)
def test_first_layer_convolution_split_over_the_batch(lua, rng, case, size):
    C, O, kW, kH, dW, dH, pW, pH = case
    B, H, W = size
    spec = f"nn.SpatialConvolution({C}, {O}, {kW}, {kH}, {dW}, {dH}, {pW}, {pH})"
    x = rng.standard_normal((B, C, H, W)).astype(np.float32)
    weights = lua.eval(f"function() require 'nn'; torch.manualSeed(7); local m = {spec}:float(); return m.weight, m.bias end")
    w, bias = (N(t).astype(np.float64) for t in weights())
    want, cols = _conv_ref(x.astype(np.float64), w.reshape(O, C, kH, kW), bias, (dH, dW), (pH, pW))
    go = rng.standard_normal(want.shape).astype(np.float32)
    g64 = go.astype(np.float64).reshape(B, O, -1)
    want_gw = 0.5 * np.einsum("bon,bkn->ok", g64, cols)
    want_gb = 0.5 * g64.sum(axis=(0, 2))
    bound_gw = 0.5 * np.einsum("bon,bkn->ok", np.abs(g64), np.abs(cols))
    bound_gb = 0.5 * np.abs(g64).sum(axis=(0, 2))
    run = lua.eval(f"loadstring([==[{CONV}]==])")
    results = {}
    for split, threads in ((False, 1), (False, 2), (True, 2), (True, 3)):
        out, gw, gb, runs = run(spec, T(x), T(go), split, threads)
        results[split, threads] = (N(out), N(gw), N(gb))
        if split and threads >= 2:
            assert runs == 2, "the split passes did not run"
        np.testing.assert_allclose(N(out), want, rtol=1e-5, atol=1e-5)
        # float32 sums of B x N products: within 1e-5 of the sums of their magnitudes
        np.testing.assert_array_less(np.abs(N(gw).reshape(O, -1) - want_gw), 1e-5 * bound_gw + 1e-6)
        np.testing.assert_array_less(np.abs(N(gb) - want_gb), 1e-5 * bound_gb + 1e-6)
    # the weight gradient's groups do not depend on the thread count: the same bits on 2 and 3
    for a, b in zip(results[True, 2], results[True, 3]):
        assert a.tobytes() == b.tobytes()
