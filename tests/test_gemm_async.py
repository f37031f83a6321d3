"""Float products on a second thread (lua/torch/backend/cpu/gemm_async.lua) and the nngraph
plans that use it (lua/nngraph/plan.lua: a forward's Linear products posted to the worker while
the next steps run, the op table's linear_forward_async; the accGradParameters pass's weight
gradients shared between the calling thread and the worker, linear_acc_async).

The worker's products against numpy float64 (transposes, alpha, beta, leading dimensions), a
failure raised at the wait; then char-rnn's LSTM through time on 2 threads (blas.watchLoad off,
as a benchmark that owns the machine) with the sharing on and off: every parameter gradient and
gradInput within float32 rounding of each other and of numpy float64 (each Linear's output and
weight gradient recomputed from its node's input and gradient), and the worker used; at 1 thread, in
Double or with the switch off it is not used and the values are the old path's exactly."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from helpers import lua_fn

dnnl_loaded = lua_fn("function() return require('torch.backend.cpu.dnnl').available end")
pytestmark = pytest.mark.skipif(not dnnl_loaded(), reason="needs oneDNN (the worker runs dnnl_sgemm)")


@pytest.fixture(autouse=True)
def worker_on(lua: Any) -> Any:
    """The worker is off by default (LUABRIDGE_GEMM_ASYNC=1 turns it on): on for these tests."""
    switch = lua_fn("""function(on)
      local async = require 'torch.backend.cpu.gemm_async'
      local was = async.enabled
      async.enabled = on
      return was
    end""")
    was = switch(True)
    yield
    switch(was)

HELPERS = str(Path(__file__).resolve().parent / "plans_nngraph.lua")

# row-major C (m x n) = alpha op(A) op(B) + beta C on the worker; A, B, C numpy arrays (float32)
_POST = lua_fn("""function(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc)
  local async = require 'torch.backend.cpu.gemm_async'
  local ok = async.post(ta, tb, m, n, k, alpha, A:data(), lda, B:data(), ldb, beta, C:data(), ldc)
  local busy = async.pending(C:data())
  async.wait()
  return ok, busy, async.pending(C:data())
end""")


@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_worker_products_match_numpy(lua: Any, rng: np.random.Generator, ta: bool, tb: bool) -> None:
    m, n, k = 37, 50, 29
    a = rng.standard_normal((k, m) if ta else (m, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if tb else (k, n)).astype(np.float32)
    c0 = rng.standard_normal((m, n + 3)).astype(np.float32)   # ldc n + 3: a view's rows
    A, B, C = lua.from_numpy(a), lua.from_numpy(b), lua.from_numpy(c0.copy())
    ok, busy, after = _POST(ta, tb, m, n, k, 0.5, A, a.shape[1], B, b.shape[1], 2.0, C, n + 3)
    assert ok and busy and not after
    opa = a.T if ta else a
    opb = b.T if tb else b
    want = c0.astype(np.float64)
    want[:, :n] = 0.5 * opa.astype(np.float64) @ opb.astype(np.float64) + 2.0 * want[:, :n]
    got = lua.to_numpy(C)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert np.array_equal(got[:, n:], c0[:, n:])   # beyond the product's columns: untouched


_MANY = lua_fn("""function(spin)
  local async = require 'torch.backend.cpu.gemm_async'
  local saved = async.spinSeconds
  async.spinSeconds = spin
  local n, jobs = 48, 40
  local a = torch.FloatTensor(n, n):uniform(-1, 1)
  local cs = {}
  local q0 = async.queue()
  local stolen0 = q0 and tonumber(q0.stolen) or 0
  for i = 1, jobs do
    cs[i] = torch.FloatTensor(n, n):fill(i)
    assert(async.post(false, false, n, n, n, 1, a:data(), n, a:data(), n, 1, cs[i]:data(), n))
  end
  async.wait()
  async.spinSeconds = saved
  local want = torch.mm(a:double(), a:double())
  local worst = 0
  for i = 1, jobs do worst = math.max(worst, (cs[i]:double() - want - i):abs():max()) end
  return worst, tonumber(async.queue().stolen) - stolen0, tonumber(async.queue().finished) == tonumber(async.queue().posted)
end""")


@pytest.mark.parametrize("spin", [0, 2e-3])
def test_many_jobs_some_run_by_the_caller(lua: Any, spin: float) -> None:
    """40 products posted back to back, then the wait: the caller runs those the worker has not
    taken yet; every one equals the product in float64 (Double BLAS) plus its start value."""
    worst, stolen, done = _MANY(spin)
    assert done and worst < 1e-4
    assert 0 <= stolen <= 40


_FAILING = lua_fn("""function()
  local async = require 'torch.backend.cpu.gemm_async'
  local a = torch.FloatTensor(4, 4):fill(1)
  -- lda 1 < k 4: dnnl_sgemm refuses the arguments; the wait raises
  assert(async.post(false, false, 4, 4, 4, 1, a:data(), 1, a:data(), 4, 0, a:data(), 4))
  local ok, err = pcall(async.wait)
  async.wait()   -- the failure is reported once
  return ok, tostring(err)
end""")


def test_worker_failure_raises_at_the_wait(lua: Any) -> None:
    ok, err = _FAILING()
    assert not ok and "dnnl_sgemm failed" in err


_THROUGH_TIME = lua_fn("""function(path, typ, threads, shared, steps, batch, hidden, reps)
  local H = package.loaded['plans_nngraph_helpers'] or dofile(path)
  package.loaded['plans_nngraph_helpers'] = H
  local plan = require 'nngraph.plan'
  local blas = require 'torch.backend.cpu.blas'
  local async = require 'torch.backend.cpu.gemm_async'
  local vocab, layers = 13, 2
  local saved, savedWatch, savedShared = torch.getnumthreads(), blas.watchLoad, plan.sharedAcc
  torch.setnumthreads(threads)
  blas.watchLoad, plan.sharedAcc, plan.sharedLinear = false, shared, shared
  torch.manualSeed(7)
  local proto = H.lstm(vocab, hidden, layers, 0, true)
  proto = typ == 'double' and proto:double() or proto:float()
  local params, grads = proto:getParameters()
  local clones = {}
  for t = 1, steps do clones[t] = proto:clone('weight', 'bias', 'gradWeight', 'gradBias') end
  local T = typ == 'double' and torch.DoubleTensor or torch.FloatTensor
  local xs, gys = {}, {}
  for t = 1, steps do
    xs[t] = torch.LongTensor(batch):random(1, vocab)
    gys[t] = T(batch, vocab):normal()
  end
  local zero = T(batch, hidden):zero()
  local posts0 = async.posts or 0
  local gradIns, linearCheck = {}, 0
  for _ = 1, reps do
    grads:zero()
    local inputs, state = {}, { zero, zero, zero, zero }
    for t = 1, steps do
      inputs[t] = { xs[t], unpack(state) }
      local out = clones[t]:forward(inputs[t])
      state = { out[1], out[2], out[3], out[4] }
    end
    local gstate = { zero, zero, zero, zero }
    for t = steps, 1, -1 do
      local g = clones[t]:backward(inputs[t], { gstate[1], gstate[2], gstate[3], gstate[4], gys[t] })
      gstate = { g[2], g[3], g[4], g[5] }
      gradIns[t] = g[2]:clone()
    end
  end
  -- every Linear's gradWeight: the sum over the clones of gradOutput^T . input, in float64
  local expected = {}
  for t = 1, steps do
    for _, node in ipairs(clones[t].forwardnodes) do
      local m = node.data.module
      if torch.type(m) == 'nn.Linear' then
        local bnode
        for _, b in ipairs(clones[t].backwardnodes) do if b.data.module == m then bnode = b end end
        local go = #bnode.data.gradOutput > 1 and bnode.data.gradOutputBuffer or bnode.data.gradOutput[1]
        local key = tostring(torch.pointer(m.gradWeight:storage())) .. ':' .. m.gradWeight:storageOffset()
        local e = expected[key] or { gw = m.gradWeight, sum = torch.DoubleTensor(m.gradWeight:size()):zero() }
        e.sum:addmm(1, go:double():t(), node.data.input[1]:double())
        expected[key] = e
      end
    end
  end
  -- every Linear's output: input . weight^T + bias, in float64 (the last iteration's)
  local worstOut = 0
  for t = 1, steps do
    for _, node in ipairs(clones[t].forwardnodes) do
      local m = node.data.module
      if torch.type(m) == 'nn.Linear' then
        local x = node.data.input[1]:double()
        local want = torch.DoubleTensor(x:size(1), m.weight:size(1))
        want:addmm(0, want, 1, x, m.weight:double():t()):add(m.bias:double():view(1, -1):expandAs(want))
        worstOut = math.max(worstOut, (m.output:double() - want):abs():max() / math.max(1, want:abs():max()))
      end
    end
  end
  local worst = 0
  for _, e in pairs(expected) do
    worst = math.max(worst, (e.gw:double() - e.sum):abs():max() / math.max(1, e.sum:abs():max()))
    linearCheck = linearCheck + 1
  end
  local posts = (async.posts or 0) - posts0
  torch.setnumthreads(saved)
  blas.watchLoad, plan.sharedAcc, plan.sharedLinear = savedWatch, savedShared, savedShared
  local planned = plan.of(clones[1]) and plan.of(clones[1]).bsteps ~= nil
  return grads:clone(), params:clone(), gradIns, posts, math.max(worst, worstOut), linearCheck, planned
end""")


def run(lua: Any, typ: str, threads: int, shared: bool, steps: int = 4, batch: int = 5,
        hidden: int = 16, reps: int = 3) -> tuple:
    grads, params, gradins, posts, worst, nlinear, planned = _THROUGH_TIME(
        HELPERS, typ, threads, shared, steps, batch, hidden, reps)
    return (lua.to_numpy(grads).copy(), lua.to_numpy(params).copy(),
            [lua.to_numpy(gradins[t + 1]).copy() for t in range(steps)], posts, worst, nlinear, planned)


def test_lstm_shared_weight_gradients_on_two_threads(lua: Any) -> None:
    """char-rnn's LSTM (2 layers, 4 clones, 3 planned iterations): on 2 threads the worker runs
    some of the Linear nodes' forward products and weight gradients; every output and gradient
    agrees with the old path to float32 rounding (different GEMM kernels sum in different
    orders) and with numpy float64 (each Linear's output and weight gradient recomputed from its
    node's input and gradient)."""
    g_on, p_on, gi_on, posts_on, worst_on, nlinear, planned = run(lua, "float", 2, True)
    g_off, p_off, gi_off, posts_off, worst_off, _, _ = run(lua, "float", 2, False)
    assert planned and nlinear == 5
    assert posts_on > 0 and posts_off == 0
    assert np.array_equal(p_on, p_off)
    scale = max(1.0, float(np.abs(g_off).max()))
    assert np.abs(g_on - g_off).max() / scale < 2e-6
    for a, b in zip(gi_on, gi_off):
        assert np.abs(a - b).max() < 2e-6
    assert worst_on < 2e-6 and worst_off < 2e-6


def test_lstm_larger_sizes_on_two_threads(lua: Any) -> None:
    """The bench's shapes (hidden 128 x 4 gates, batch 32): products the size of the real step."""
    g_on, _, _, posts_on, worst_on, _, _ = run(lua, "float", 2, True, steps=3, batch=32, hidden=128, reps=2)
    g_off, _, _, _, _, _, _ = run(lua, "float", 2, False, steps=3, batch=32, hidden=128, reps=2)
    assert posts_on > 0
    assert np.abs(g_on - g_off).max() / max(1.0, float(np.abs(g_off).max())) < 5e-6
    assert worst_on < 5e-6


@pytest.mark.parametrize("typ,threads", [("float", 1), ("double", 2)])
def test_not_used_on_one_thread_or_in_double(lua: Any, typ: str, threads: int) -> None:
    g_on, _, gi_on, posts_on, _, _, _ = run(lua, typ, threads, True)
    g_off, _, gi_off, posts_off, _, _, _ = run(lua, typ, threads, False)
    assert posts_on == 0 and posts_off == 0
    assert np.array_equal(g_on, g_off)
    for a, b in zip(gi_on, gi_off):
        assert np.array_equal(a, b)


_TIED = lua_fn("""function(shared)
  require 'nngraph'
  local plan = require 'nngraph.plan'
  local blas = require 'torch.backend.cpu.blas'
  local async = require 'torch.backend.cpu.gemm_async'
  local saved, savedWatch, savedShared = torch.getnumthreads(), blas.watchLoad, plan.sharedAcc
  torch.setnumthreads(2)
  blas.watchLoad, plan.sharedAcc, plan.sharedLinear = false, shared, shared
  torch.manualSeed(3)
  -- two Linear nodes sharing one weight and gradWeight, summed, then a Tanh chain
  local x = nn.Identity()()
  local a = nn.Linear(24, 24)
  local b = a:clone('weight', 'bias', 'gradWeight', 'gradBias')
  local y = nn.Tanh()(nn.CAddTable()({ a(x), b(nn.Tanh()(x)) }))
  local g = nn.gModule({ x }, { y }):float()
  local input, gy = torch.FloatTensor(16, 24):normal(), torch.FloatTensor(16, 24):normal()
  local posts0 = async.posts or 0
  for _ = 1, 4 do
    g:zeroGradParameters()
    g:forward(input)
    g:backward(input, gy)
  end
  torch.setnumthreads(saved)
  blas.watchLoad, plan.sharedAcc, plan.sharedLinear = savedWatch, savedShared, savedShared
  return a.gradWeight:clone(), a.gradBias:clone(), (async.posts or 0) - posts0
end""")


def test_tied_weights_in_one_graph(lua: Any) -> None:
    """Two Linear nodes accumulating into one gradWeight: the second waits for the worker's
    product into it before it runs (or is posted behind it); the sum is the old path's."""
    gw_on, gb_on, posts = _TIED(True)
    gw_off, gb_off, posts_off = _TIED(False)
    assert posts > 0 and posts_off == 0
    w_on, w_off = lua.to_numpy(gw_on), lua.to_numpy(gw_off)
    assert np.abs(w_on - w_off).max() / max(1.0, float(np.abs(w_off).max())) < 2e-6
    np.testing.assert_array_equal(lua.to_numpy(gb_on), lua.to_numpy(gb_off))
