"""nngraph plans (issue 25, lua/nngraph/plan.lua and the nn_chain backend family): a gModule
plans itself on its first forward and backward and then runs its elementwise chains as fused
kernels. Every test runs the same model with nn.plans.enabled on and off and compares all a
program can read (outputs, gradInputs, every node's module output and gradInput, parameters
and their gradients) after several runs, and checks that the plan was used; char-rnn's LSTM
cell is checked against numpy float64 too. Then the plan's invalidation (input sizes, types,
mode, module fields, tensors resized behind its back, the switch), errors, and the kernels'
layouts (strided gates)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import luabridge
from helpers import N, T, lua_fn

HELPERS = str(Path(__file__).resolve().parent / "plans_nngraph.lua")
TOL = 2e-5   # float32 roundings: the fused backward rounds each step, the modules' loops once

_H = lua_fn("""function(path)
  package.loaded['plans_nngraph_helpers'] = package.loaded['plans_nngraph_helpers'] or dofile(path)
  return package.loaded['plans_nngraph_helpers']
end""")


@pytest.fixture(scope="module")
def h(lua) -> Any:
    return _H(HELPERS)


_THROUGH_TIME = lua_fn("""function(H, kind, vocab, hidden, layers, dropout, steps, batch, train, onehot)
  local off, on, nf, nb = H.throughTimeCase(kind, 'float', vocab, hidden, layers, dropout, steps, batch, train, onehot)
  local diff, same = H.difference(off, on)
  return diff, same, nf, nb, #on
end""")


@pytest.mark.parametrize("kind", ["lstm", "gru", "rnn"])
@pytest.mark.parametrize("train", [True, False], ids=["train", "eval"])
def test_char_rnn_models_through_time(h: Any, kind: str, train: bool) -> None:
    """char-rnn's LSTM, GRU and RNN (2 layers, one-hot input, clones sharing parameters over 4
    steps, state passed from clone to clone): planned runs read as layer-by-layer ones."""
    diff, same, nf, nb, count = _THROUGH_TIME(h, kind, 11, 8, 2, 0, 4, 5, train, True)
    assert same and count > 50
    assert diff < TOL
    assert nf == 4                    # every clone's forward ran its plan
    assert nb == (4 if train else 0)  # and its backward


def test_lstm_batch_one_and_dropout(h: Any) -> None:
    """Batch 1 (gate slices of one row) and Dropout between the layers (a node outside the
    chains, drawing the same masks in the same order)."""
    for batch, dropout in ((1, 0), (3, 0.5)):
        diff, same, nf, nb, _ = _THROUGH_TIME(h, "lstm", 7, 5, 2, dropout, 3, batch, True, True)
        assert same and diff < TOL and nf == 3 and nb == 3
    diff, same, nf, nb, _ = _THROUGH_TIME(h, "gru", 7, 5, 3, 0.25, 3, 2, True, False)
    assert same and diff < TOL and nf == 3 and nb == 3


_CELL = lua_fn("""function(H, x, c, hh)
  local m = H.lstm(5, 4, 1, 0, false):float()
  local chains
  for _ = 1, 2 do m:forward({ x, c, hh }) end
  local P = H.plan.of(m)
  local named = {}
  for _, node in ipairs(m.forwardnodes) do
    local mod = node.data.module
    if mod and torch.type(mod) == 'nn.Linear' then named[#named + 1] = mod end
  end
  return m.output[1], m.output[2], m.output[3], named[1].weight, named[1].bias, named[2].weight,
    named[2].bias, named[3].weight, named[3].bias, P and #P.fchains or 0
end""")


def test_lstm_cell_against_numpy(h: Any) -> None:
    """One planned LSTM step (inputs {x, c, h}) against the cell written in numpy float64."""
    rng = np.random.default_rng(5)
    x, c, hh = (rng.standard_normal((3, n)).astype(np.float32) for n in (5, 4, 4))
    c_new, h_new, logp, *params, nchains = _CELL(h, T(x), T(c), T(hh))
    assert nchains == 1
    w = [N(p).astype(np.float64) for p in params]
    linears = [(w[0], w[1]), (w[2], w[3]), (w[4], w[5])]
    # which Linear is i2h / h2h / decoder: by their shapes (x has 5 features, the gates 16)
    i2h = next(l for l in linears if l[0].shape == (16, 5))
    h2h = next(l for l in linears if l[0].shape == (16, 4))
    dec = next(l for l in linears if l[0].shape == (5, 4))
    sums = x @ i2h[0].T + i2h[1] + hh @ h2h[0].T + h2h[1]
    g = sums.reshape(3, 4, 4)
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    i, f, o, wr = sig(g[:, 0]), sig(g[:, 1]), sig(g[:, 2]), np.tanh(g[:, 3])
    c_want = f * c + i * wr
    h_want = o * np.tanh(c_want)
    z = h_want @ dec[0].T + dec[1]
    logp_want = z - np.log(np.exp(z).sum(1, keepdims=True))
    np.testing.assert_allclose(N(c_new), c_want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(N(h_new), h_want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(N(logp), logp_want, rtol=1e-5, atol=1e-5)


_FIXED = lua_fn("""function(H, build, train, reps)
  torch.manualSeed(11)
  local model, input, gradOutput = build()
  local off = H.fixed(model, false, input, gradOutput, train, reps)
  local on, nf, nb = H.fixed(model, true, input, gradOutput, train, reps)
  local diff, same = H.difference(off, on)
  return diff, same, nf, nb
end""")

_GRAPHS = {
    # an nngraph MLP: every activation a chain of its own
    "mlp": """function()
      local x = nn.Identity()()
      local h = nn.Tanh()(nn.Linear(6, 8)(x))
      local y = nn.Sigmoid()(nn.Linear(8, 3)(h))
      return nn.gModule({ x }, { y }):float(), torch.FloatTensor(4, 6):normal(), torch.FloatTensor(4, 3):normal()
    end""",
    # shared nodes and several outputs: a node used by a chain member, another chain's member
    # and the graph's outputs; constants, subtraction
    "shared": """function()
      local a, b = nn.Identity()(), nn.Identity()()
      local la, lb = nn.Linear(5, 5)(a), nn.Linear(5, 5)(b)
      local s = nn.Sigmoid()(la)
      local t = nn.Tanh()(nn.CSubTable()({ s, lb }))
      local u = nn.CMulTable()({ s, t })
      local v = nn.AddConstant(0.5)(nn.MulConstant(-2)(u))
      local w = nn.CAddTable()({ v, s, t })
      local z = nn.Linear(5, 2)(w)
      return nn.gModule({ a, b }, { w, s, nn.Sigmoid()(z), u }):float(),
        { torch.FloatTensor(3, 5):normal(), torch.FloatTensor(3, 5):normal() },
        { torch.FloatTensor(3, 5):normal(), torch.FloatTensor(3, 5):normal(),
          torch.FloatTensor(3, 2):normal(), torch.FloatTensor(3, 5):normal() }
    end""",
    # a gModule inside a gModule (the inner one plans itself) and inside a Sequential
    "nested": """function()
      local x = nn.Identity()()
      local inner = nn.gModule({ x }, { nn.CMulTable()({ nn.Sigmoid()(x), nn.Tanh()(x) }) })
      local y = nn.Identity()()
      local mid = inner(nn.Linear(4, 4)(y))
      local out = nn.CAddTable()({ nn.Tanh()(mid), mid })
      local g = nn.gModule({ y }, { out })
      return nn.Sequential():add(g):add(nn.Linear(4, 2)):float(), torch.FloatTensor(2, 4):normal(),
        torch.FloatTensor(2, 2):normal()
    end""",
    # a module in two nodes (one output tensor for both), and a Reshape that copies its strided
    # input (a gate slice) instead of viewing it
    "reused_and_copying": """function()
      local x = nn.Identity()()
      local shared = nn.Tanh()
      local l1, l2 = nn.Linear(6, 6)(x), nn.Linear(6, 6)(x)
      local a, b = shared(l1), shared(l2)
      local p1, p2 = nn.SplitTable(2)(nn.Reshape(2, 3)(nn.Sigmoid()(nn.CAddTable()({ a, b })))):split(2)
      local r = nn.Reshape(3)(p1)
      local out = nn.CMulTable()({ nn.Tanh()(r), nn.Sigmoid()(p2) })
      return nn.gModule({ x }, { out, a }):float(), torch.FloatTensor(4, 6):normal(),
        { torch.FloatTensor(4, 3):normal(), torch.FloatTensor(4, 6):normal() }
    end""",
}


@pytest.mark.parametrize("name", list(_GRAPHS))
@pytest.mark.parametrize("train", [True, False], ids=["train", "eval"])
def test_graphs(h: Any, name: str, train: bool) -> None:
    build = luabridge.eval(_GRAPHS[name])
    diff, same, nf, nb = _FIXED(h, build, train, 3)
    assert same and diff < TOL
    assert nf >= 1 and nb == (nf if train else 0)


_RECURRENT_SAME_MODULE = lua_fn("""function(H)
  -- one LSTM gModule fed its own outputs (no clones): the state it reads is the tensors it writes
  torch.manualSeed(2)
  local proto = H.lstm(6, 5, 1, 0, false):float()
  local function run(enabled)
    H.plans.enabled = enabled
    local m = proto:clone()
    local x = torch.FloatTensor(2, 6)
    local state = { torch.FloatTensor(2, 5):zero(), torch.FloatTensor(2, 5):zero() }
    local outs = {}
    torch.manualSeed(9)
    for t = 1, 5 do
      x:normal()
      local out = m:forward({ x, state[1], state[2] })
      outs[#outs + 1] = out[3]:clone()
      state = { out[1], out[2] }
    end
    local g = { torch.FloatTensor(2, 5):normal(), torch.FloatTensor(2, 5):normal(), torch.FloatTensor(2, 6):normal() }
    local gi = m:backward({ x, state[1], state[2] }, g)
    outs[#outs + 1] = gi[2]:clone()
    outs[#outs + 1] = gi[3]:clone()
    H.plans.enabled = true
    return outs
  end
  local off, on = run(false), run(true)
  return H.difference(off, on)
end""")


def test_outputs_fed_back_as_inputs(h: Any) -> None:
    """A gModule fed its own output tensors as the next inputs: the fused kernels read and
    write in the modules' order, so the results are the layer-by-layer ones."""
    diff, same = _RECURRENT_SAME_MODULE(h)
    assert same and diff < TOL


_INVALIDATION = lua_fn("""function(H)
  local plan, plans = H.plan, H.plans
  torch.manualSeed(4)
  local x = nn.Identity()()
  local lin = nn.Linear(3, 3)
  local mc = nn.MulConstant(2)
  local sig = nn.Sigmoid()
  local y = mc(sig(lin(x)))
  local m = nn.gModule({ x }, { nn.CMulTable()({ y, nn.Tanh()(y) }) }):float()
  local ref = m:clone()
  local input = torch.FloatTensor(4, 3):normal()
  local report = {}
  local function check(name, inp)
    plans.enabled = false
    local want = ref:forward(inp):clone()
    plans.enabled = true
    local got = m:forward(inp)
    report[#report + 1] = name .. '=' .. string.format('%.3g', (got - want):abs():max())
  end
  m:forward(input)
  report[#report + 1] = 'planned=' .. tostring(plan.of(m) ~= nil and #plan.of(m).fchains)
  local P = plan.of(m)
  check('same', input)
  report[#report + 1] = 'kept=' .. tostring(plan.of(m) == P)
  check('batch', torch.FloatTensor(7, 3):normal())          -- input size: dropped, replanned
  report[#report + 1] = 'replanned=' .. tostring(plan.of(m) ~= P and plan.of(m) ~= nil)
  P = plan.of(m)
  mc.constant_scalar = 3                                     -- a module's field
  for _, node in ipairs(ref.forwardnodes) do
    if node.data.module and torch.type(node.data.module) == 'nn.MulConstant' then node.data.module.constant_scalar = 3 end
  end
  check('field', input)
  report[#report + 1] = 'fieldDropped=' .. tostring(plan.of(m) ~= P)
  P = plan.of(m)
  sig.output:resize(2)                                       -- a tensor resized behind the plan
  check('resized', input)
  report[#report + 1] = 'resizedDropped=' .. tostring(plan.of(m) ~= P)
  m:evaluate(); ref:evaluate()                               -- the mode
  P = plan.of(m)
  check('mode', input)
  report[#report + 1] = 'modeDropped=' .. tostring(plan.of(m) ~= P)
  plans.enabled = false                                      -- the switch
  m:forward(input)
  report[#report + 1] = 'off=' .. tostring(plan.of(m) == nil)
  plans.enabled = true
  m:double(); ref:double()                                   -- the type: dropped, Double planned afresh
  check('double', input:double())
  check('double2', input:double())
  report[#report + 1] = 'doubleFused=' .. tostring(plan.of(m) ~= nil and #plan.of(m).fchains)
  return table.concat(report, ' ')
end""")


def test_invalidation(h: Any) -> None:
    report = dict(kv.split("=") for kv in _INVALIDATION(h).split())
    assert report["planned"] == "1"
    assert report["kept"] == "true" and report["replanned"] == "true"
    assert report["fieldDropped"] == "true" and report["resizedDropped"] == "true"
    assert report["modeDropped"] == "true" and report["off"] == "true"
    assert report["doubleFused"] == "1"   # Double plans too (tests/test_plans_nngraph_double.py)
    for name in ("same", "batch", "field", "resized", "mode", "double", "double2"):
        assert float(report[name]) < 1e-6, (name, report)


_BAD_INPUT = lua_fn("""function(H, enabled)
  H.plans.enabled = enabled
  torch.manualSeed(6)
  local m = H.lstm(6, 4, 1, 0, false):float()
  local good = { torch.FloatTensor(2, 6):normal(), torch.FloatTensor(2, 4):normal(), torch.FloatTensor(2, 4):normal() }
  m:forward(good); m:forward(good)
  local ok, err = pcall(function() return m:forward({ torch.FloatTensor(2, 5):normal(), good[2], good[3] }) end)
  local ok2, err2 = pcall(function() return m:forward({ good[1], torch.FloatTensor(3, 4):normal(), good[3] }) end)
  local out = m:forward(good)[3]:clone()
  H.plans.enabled = true
  return ok, tostring(err), ok2, tostring(err2), out
end""")


def test_bad_input_same_error_and_usable(h: Any) -> None:
    off = _BAD_INPUT(h, False)
    on = _BAD_INPUT(h, True)
    assert not off[0] and not on[0] and not off[2] and not on[2]
    assert "size mismatch" in on[1]
    assert on[1] == off[1] and on[3] == off[3]
    np.testing.assert_allclose(N(on[4]), N(off[4]), rtol=1e-6, atol=1e-6)


_STRIDED = lua_fn("""function()
  -- the kernels on strided operands (a narrowed row layout) and a sum into a buffer
  local backend = require 'torch.backend'
  local a = torch.FloatTensor(4, 10):normal()
  local g = torch.FloatTensor(4, 3):normal()
  local out, gi, s = torch.FloatTensor(4, 3), torch.FloatTensor(4, 3), torch.FloatTensor(4, 3)
  local view = a:narrow(2, 5, 3)
  local prog = { nslots = 6, ops = {
    { 'sigmoid', 2, 1 }, { 'sigmoid_bwd', 4, 3, 2 }, { 'add', 5, 4, 1 }, { 'copy', 6, 5 },
  } }
  local dst = torch.FloatTensor(4, 7):zero()
  local T = { view, out, g, gi, s, dst:narrow(2, 2, 3) }
  local run = backend.of(a).chain_compile(prog, T)
  local ok = run(T)
  local bad = run({ a:narrow(2, 1, 4), out, g, gi, s, T[6] })   -- a different layout: declined
  return ok, bad, view:clone(), out, g, gi, s, dst
end""")


def test_kernel_strided_operands() -> None:
    ok, bad, view, out, g, gi, s, dst = _STRIDED()
    assert ok is True and bad is False
    v = N(view).astype(np.float64)
    y = 1 / (1 + np.exp(-v))
    np.testing.assert_allclose(N(out), y, rtol=1e-6)
    want_gi = N(g) * (1 - N(out)) * N(out)
    np.testing.assert_allclose(N(gi), want_gi, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(N(s), N(gi) + N(view), rtol=1e-6)
    d = N(dst)
    np.testing.assert_array_equal(d[:, 1:4], N(s))
    assert (d[:, 0] == 0).all() and (d[:, 4:] == 0).all()


_BACKWARD_FALLBACK = lua_fn("""function(H)
  -- a gradInput resized behind the plan between two calls: the backward kernel declines, the
  -- chain's nodes run one by one from the gradients that reached it, the plan is dropped
  torch.manualSeed(8)
  local proto = H.lstm(6, 4, 1, 0, false):float()
  local input = { torch.FloatTensor(3, 6):normal(), torch.FloatTensor(3, 4):normal(), torch.FloatTensor(3, 4):normal() }
  local g = { torch.FloatTensor(3, 4):normal(), torch.FloatTensor(3, 4):normal(), torch.FloatTensor(3, 6):normal() }
  local function run(enabled)
    H.plans.enabled = enabled
    local m = proto:clone()
    for _ = 1, 2 do m:forward(input); m:backward(input, g) end
    local planned = H.plan.of(m) ~= nil and H.plan.of(m).bsteps ~= nil
    m:forward(input)
    for _, node in ipairs(m.forwardnodes) do
      if node.data.module and torch.type(node.data.module) == 'nn.Tanh' then node.data.module.gradInput:resize(1) end
    end
    local gi = m:backward(input, g)
    local after = H.plan.of(m)
    H.plans.enabled = true
    return { gi[1]:clone(), gi[2]:clone(), gi[3]:clone() }, planned, after
  end
  local off = run(false)
  local on, planned, after = run(true)
  local diff, same = H.difference(off, on)
  return diff, same, planned, after == nil
end""")


def test_backward_kernel_declines(h: Any) -> None:
    diff, same, planned, dropped = _BACKWARD_FALLBACK(h)
    assert planned and dropped
    assert same and diff < TOL


_BAD_INDEX = lua_fn("""function(H, enabled)
  H.plans.enabled = enabled
  torch.manualSeed(6)
  local m = H.rnn(6, 4, 1, 0, true):float()
  local good = { torch.LongTensor({ 1, 6, 3 }), torch.FloatTensor(3, 4):normal() }
  m:forward(good); m:forward(good)
  local fused = H.plan.of(m) and #H.plan.of(m).fchains or 0
  local ok, err = pcall(function() return m:forward({ torch.LongTensor({ 1, 7, 3 }), good[2] }) end)
  local out = m:forward(good)[2]:clone()
  H.plans.enabled = true
  return ok, tostring(err), out, fused
end""")


def test_one_hot_index_out_of_range(h: Any) -> None:
    """OneHot runs fused (the characters' one-hot rows); an index out of range makes the kernel
    decline before writing, and the module then raises its own error."""
    off, on = _BAD_INDEX(h, False), _BAD_INDEX(h, True)
    assert on[3] == 2   # OneHot's chain and the RNN's
    assert not off[0] and not on[0]
    assert "indices must be in [1, 6]" in on[1] and on[1] == off[1]
    np.testing.assert_allclose(N(on[2]), N(off[2]), rtol=1e-6, atol=1e-6)


def test_bench_torch_nn_lstm_reference_matches_the_twin() -> None:
    """bench/real_models.py's torch.nn.LSTM reference (gates reordered from char-rnn's i, f, o, g
    to PyTorch's i, f, g, o) computes the twin's loss and gradients from the same weights."""
    torch = pytest.importorskip("torch", reason="the reference is a PyTorch model")
    from helpers import load_bench

    bench = load_bench("real_models.py", "bench_real_models_plans")
    torch.manual_seed(0)
    twin = bench.torch_twin("lstm", vocab=7, hidden=5, layers=2)
    ref = bench.torch_nn_lstm(twin)
    x = torch.randint(0, 7, (4, 3))
    y = torch.randint(0, 7, (4, 3))
    a, b = bench.torch_lstm_run(twin, x, y), bench.torch_nn_lstm_run(ref, x, y, 7)
    a.backward()
    b.backward()
    np.testing.assert_allclose(b.item(), a.item(), rtol=1e-5)
    np.testing.assert_allclose(ref["decoder"].weight.grad.numpy(), twin.decoder.weight.grad.numpy(), rtol=1e-4, atol=1e-6)
    order = torch.cat([torch.arange(0, 10), torch.arange(15, 20), torch.arange(10, 15)])
    np.testing.assert_allclose(ref["lstm"].weight_hh_l0.grad.numpy(), twin.h2h_1.weight.grad[order].numpy(),
                               rtol=1e-4, atol=1e-6)


_COLLECTED = lua_fn("""function(H)
  -- a planned gModule is collected once the program drops it (its plan lives beside it)
  local weak = setmetatable({}, { __mode = 'k' })
  do
    local m = H.lstm(5, 4, 1, 0, false):float()
    local input = { torch.FloatTensor(2, 5):normal(), torch.FloatTensor(2, 4):normal(), torch.FloatTensor(2, 4):normal() }
    local g = { torch.FloatTensor(2, 4):normal(), torch.FloatTensor(2, 4):normal(), torch.FloatTensor(2, 5):normal() }
    for _ = 1, 2 do m:forward(input); m:backward(input, g) end
    assert(H.plan.of(m) and H.plan.of(m).bsteps)
    weak[m] = true
  end
  for _ = 1, 4 do collectgarbage() end
  return next(weak) == nil
end""")


def test_planned_gmodule_is_collected(h: Any) -> None:
    assert _COLLECTED(h) is True
