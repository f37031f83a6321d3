"""What an nngraph plan checks on every call (lua/nngraph/plan.lua's snapshot): the fields its
fused kernels depend on (each chain module's kind's reads: output, gradInput, inplace, constants,
sizes; instance methods; each chain member node's module; the gModule's mode; test_plans_nngraph_fields.py
checks the reads), with plan.checkAllFields reading every field as before; and gModule:backward, which checks the plan once for updateGradInput and
accGradParameters. Each case runs the planned gModule beside a layer-by-layer copy (plans off)
changed the same way and compares what a program reads."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from helpers import N, lua_fn
from test_plans_nngraph import h  # noqa: F401  (the fixture: tests/plans_nngraph.lua's helpers)


_CHANGES = lua_fn("""function(H, all)
  local plan, plans = H.plan, H.plans
  plan.checkAllFields = all
  torch.manualSeed(5)
  local function build()
    local x = nn.Identity()()
    local lin = nn.Linear(3, 3)
    local y = nn.MulConstant(2)(nn.Sigmoid()(lin(x)))
    return nn.gModule({ x }, { nn.CMulTable()({ y, nn.Tanh()(y) }) }):float()
  end
  local m = build()
  local ref = m:clone()
  local function node(g, typ)
    for _, n in ipairs(g.forwardnodes) do
      if n.data.module and torch.type(n.data.module) == typ then return n end
    end
  end
  local input = torch.FloatTensor(4, 3):normal()
  local gout = torch.FloatTensor(4, 3):normal()
  local report = {}
  local function check(name)
    plans.enabled = false
    local want = ref:forward(input):clone()
    local wantGrad = ref:backward(input, gout):clone()
    local wantOut = {}
    for i, typ in ipairs { 'nn.Sigmoid', 'nn.Tanh' } do wantOut[i] = node(ref, typ).data.module.output:clone() end
    plans.enabled = true
    local P = plan.of(m)
    local got = m:forward(input):clone()
    local gotGrad = m:backward(input, gout):clone()
    local err = math.max((got - want):abs():max(), (gotGrad - wantGrad):abs():max())
    for i, typ in ipairs { 'nn.Sigmoid', 'nn.Tanh' } do
      err = math.max(err, (node(m, typ).data.module.output - wantOut[i]):abs():max())
    end
    report[#report + 1] = name .. '=' .. string.format('%.3g', err)
    report[#report + 1] = name .. 'Dropped=' .. tostring(P ~= nil and plan.of(m) ~= P)
  end
  m:forward(input); m:backward(input, gout); m:forward(input); m:backward(input, gout)
  report[#report + 1] = 'planned=' .. tostring(plan.of(m) ~= nil and plan.of(m).bsteps ~= nil)
  check('same')
  -- an instance's own updateOutput on a chain module: called, not the fused kernel
  for _, g in ipairs { m, ref } do
    node(g, 'nn.Sigmoid').data.module.updateOutput = function(self, x)
      self.output:resizeAs(x):copy(x):mul(0.25)
      return self.output
    end
  end
  check('method')
  check('method2')
  -- a chain member node's module replaced
  for _, g in ipairs { m, ref } do node(g, 'nn.MulConstant').data.module = nn.MulConstant(-3):float() end
  check('module')
  check('module2')
  -- a chain module's output tensor replaced: the module's new tensor gets the values
  node(m, 'nn.Tanh').data.module.output = torch.FloatTensor()
  check('output')
  -- the mode
  m:evaluate(); ref:evaluate()
  check('mode')
  plan.checkAllFields = false
  return table.concat(report, ' ')
end""")


@pytest.mark.parametrize("all_fields", [False, True], ids=["kernel-fields", "all-fields"])
def test_changes_drop_the_plan(h: Any, all_fields: bool) -> None:
    report = dict(kv.split("=") for kv in _CHANGES(h, all_fields).split())
    assert report["planned"] == "true"
    assert report["sameDropped"] == "false"
    for name in ("method", "module", "output", "mode"):
        assert report[name + "Dropped"] == "true", (name, report)
    for name in ("same", "method", "method2", "module", "module2", "output", "mode"):
        assert float(report[name]) < 1e-6, (name, report)


_BACKWARD = lua_fn("""function(H)
  local plan, plans = H.plan, H.plans
  torch.manualSeed(8)
  local m = H.lstm(6, 4, 1, 0, false):float()
  local ref = m:clone()
  local input = { torch.FloatTensor(3, 6):normal(), torch.FloatTensor(3, 4):normal(), torch.FloatTensor(3, 4):normal() }
  local gout = { torch.FloatTensor(3, 4):normal(), torch.FloatTensor(3, 4):normal(), torch.FloatTensor(3, 6):normal() }
  local calls = 0
  -- an instance's own accGradParameters: gModule:backward calls it
  m.accGradParameters = function(self, x, g, scale)
    calls = calls + 1
    return nn.gModule.accGradParameters(self, x, g, scale)
  end
  local p, gp = m:getParameters()
  local rp, rgp = ref:getParameters()
  local acc = 0
  local wrapped = plan.acc
  plan.acc = function(...) acc = acc + 1; return wrapped(...) end
  local ok, err = pcall(function()
    for r = 1, 3 do
      gp:zero(); rgp:zero()
      plans.enabled = false
      ref:forward(input); ref:backward(input, gout, 0.5)
      plans.enabled = true
      m:forward(input); m:backward(input, gout, 0.5)
    end
  end)
  plan.acc = wrapped
  plans.enabled = true
  if not ok then error(err, 0) end
  return calls, acc, gp, rgp, m.gradInput[2], ref.gradInput[2]
end""")


def test_backward_checks_once_and_keeps_overrides(h: Any) -> None:
    calls, acc, gp, rgp, gi, rgi = _BACKWARD(h)
    assert calls == 3          # the instance's accGradParameters ran on every backward
    assert acc >= 2            # planned accGradParameters from the second backward on
    np.testing.assert_allclose(N(gp), N(rgp), rtol=2e-5, atol=2e-6)
    np.testing.assert_allclose(N(gi), N(rgi), rtol=2e-5, atol=2e-6)


_FIRST_BACKWARD = lua_fn("""function(H, rerun, relu)
  local plan, plans = H.plan, H.plans
  plan.rerunFirstBackward = rerun
  torch.manualSeed(9)
  local B, S = 8, 16   -- sizes where the modules' Float passes run numpy's loops, as the chains
  local m = H.lstm(6, S, 2, 0, false):float()
  if relu then   -- a module whose updateGradInput writes its gradOutput: no second run
    for _, node in ipairs(m.forwardnodes) do
      if node.data.module and torch.type(node.data.module) == 'nn.LogSoftMax' then
        node.data.module = nn.Sequential():add(nn.ReLU(true)):add(nn.LogSoftMax()):float()
      end
    end
  end
  local ref = m:clone()
  local input = { torch.FloatTensor(B, 6):normal(), torch.FloatTensor(B, S):normal(), torch.FloatTensor(B, S):normal(),
                  torch.FloatTensor(B, S):normal(), torch.FloatTensor(B, S):normal() }
  local gout = {}
  for i = 1, 4 do gout[i] = torch.FloatTensor(B, S):normal() end
  gout[5] = torch.FloatTensor(B, 6):normal()
  local function grads(g)
    local list = {}
    for _, mod in ipairs(g:listModules()) do
      local gi = mod.gradInput
      if torch.isTensor(gi) then list[#list + 1] = gi:clone()
      elseif type(gi) == 'table' then for _, t in ipairs(gi) do if torch.isTensor(t) then list[#list + 1] = t:clone() end end end
    end
    return list
  end
  local function worst(a, b)
    local w = 0
    for i = 1, #a do
      if a[i]:nElement() > 0 then w = math.max(w, (a[i]:double() - b[i]:double()):abs():max()) end
    end
    return w
  end
  local _, gp = m:getParameters()
  local _, rgp = ref:getParameters()
  gp:zero(); rgp:zero()
  plans.enabled = false
  ref:forward(input); ref:backward(input, gout)
  plans.enabled = true
  m:forward(input); m:backward(input, gout)          -- planned forward, the backward planned here
  local first, firstParams = grads(m), gp:clone()
  local layered = worst(first, grads(ref))
  local once = (gp:double() - rgp:double()):abs():max()
  gp:zero()
  m:forward(input); m:backward(input, gout)          -- a planned backward
  local again = worst(first, grads(m))
  plan.rerunFirstBackward = true
  return again, layered, once, (gp:double() - firstParams:double()):abs():max(), #first
end""")


def test_first_backward_runs_the_plan(h: Any) -> None:
    """The backward that plans (the first) ends with the planned backward's values: a second
    backward of the same input gives the same bits; the parameters' gradients are accumulated
    once; with rerunFirstBackward off the first backward is the layer-by-layer one (its Float
    roundings differ in the last bits)."""
    again, layered, once, params_again, count = _FIRST_BACKWARD(h, True, False)
    assert count > 20
    assert again == 0.0
    assert layered < 2e-5          # against plans off: float32 roundings only
    assert once < 2e-5             # gradients accumulated once, not twice
    assert params_again < 2e-5
    again_off, _, once_off, _, _ = _FIRST_BACKWARD(h, False, False)
    assert once_off < 2e-5
    assert 0.0 < again_off < 2e-5  # the old path: the second backward's last bits differ


def test_first_backward_with_an_inplace_module(h: Any) -> None:
    """A module that writes its gradOutput (ReLU(true)) keeps the first backward layer by
    layer: its gradients are right, accumulated once."""
    _, layered, once, _, _ = _FIRST_BACKWARD(h, True, True)
    assert layered < 2e-5 and once < 2e-5


_SLOTS = lua_fn("""function(H, cached)
  local chain = require 'torch.backend.cpu.nn_chain'
  local plan, plans = H.plan, H.plans
  chain.cachedChecks = cached
  torch.manualSeed(11)
  local x = nn.Identity()()
  local sig, tanh = nn.Sigmoid(), nn.Tanh()
  local y = sig(nn.Linear(5, 6)(x))
  local m = nn.gModule({ x }, { nn.CMulTable()({ y, tanh(y) }) }):float()
  local input = torch.FloatTensor(4, 5):normal()
  local report = {}
  local function check(name)
    local P = plan.of(m)
    local got = m:forward(input):clone()
    local want = torch.cmul(torch.sigmoid(m.modules[2].output), torch.tanh(torch.sigmoid(m.modules[2].output)))
    local err = math.max((got - want):abs():max(), (tanh.output - torch.tanh(sig.output)):abs():max())
    report[#report + 1] = name .. '=' .. string.format('%.3g', err)
    report[#report + 1] = name .. 'Kept=' .. tostring(P ~= nil and plan.of(m) == P)
  end
  m:forward(input); m:forward(input)
  check('same')
  tanh.output:set(torch.FloatTensor(4, 6):fill(7))        -- another storage, the same layout
  check('set')
  tanh.output:storage():resize(4 * 6 + 1000)              -- the storage reallocated in place
  check('storage')
  sig.output:resize(6, 4)                                 -- another layout: declined, dropped
  check('layout')
  chain.cachedChecks = true
  return table.concat(report, ' ')
end""")


@pytest.mark.parametrize("cached", [True, False], ids=["cached", "full"])
def test_chain_slots_follow_their_tensors(h: Any, cached: bool) -> None:
    """A chain's slot checks (nn_chain's cachedChecks keeps what the last call found) follow a
    tensor set to another storage and a storage reallocated in place, and decline a new layout."""
    report = dict(kv.split("=") for kv in _SLOTS(h, cached).split())
    for name in ("same", "set", "storage", "layout"):
        assert float(report[name]) < 1e-6, (name, report)
    assert report["sameKept"] == "true" and report["setKept"] == "true" and report["storageKept"] == "true"
    assert report["layoutKept"] == "false"


_RESHAPE = lua_fn("""function(H)
  local plan, plans = H.plan, H.plans
  torch.manualSeed(7)
  local x = nn.Identity()()
  local y = nn.Tanh()(nn.Reshape(4)(nn.Sigmoid()(nn.Linear(3, 4)(x))))
  local m = nn.gModule({ x }, { y }):float()
  local input = torch.FloatTensor(5, 3):normal()
  m:forward(input); m:forward(input)
  local P = plan.of(m)
  for _, n in ipairs(m.forwardnodes) do
    local r = n.data.module
    if torch.type(r) == 'nn.Reshape' then
      r.size, r.nelement, r.batchsize = torch.LongStorage { 2, 2 }, 4, torch.LongStorage { 0, 2, 2 }
    end
  end
  local got = m:forward(input):clone()
  plans.enabled = false
  local want = m:forward(input):clone()
  plans.enabled = true
  return tostring(P ~= nil), got:size():totable(), want:size():totable(), (got:view(-1) - want:view(-1)):abs():max()
end""")


def test_reshape_size_change_drops_the_plan(h: Any) -> None:
    """A Reshape in a chain given new sizes: the plan stands no more, the output takes the new
    shape (the sizes are among the fields a plan checks)."""
    planned, got, want, err = _RESHAPE(h)
    assert planned == "true"
    assert list(want.values()) == [5, 2, 2]
    assert list(got.values()) == [5, 2, 2]
    assert err == 0.0
