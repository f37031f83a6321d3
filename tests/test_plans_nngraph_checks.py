"""What an nngraph plan checks on every call (lua/nngraph/plan.lua's snapshot): the fields its
fused kernels depend on (each chain module's output, gradInput, inplace, train, instance
methods, constants; each chain member node's module), with plan.checkAllFields reading every
field as before; and gModule:backward, which checks the plan once for updateGradInput and
accGradParameters. Each case runs the planned gModule beside a layer-by-layer copy (plans off)
changed the same way and compares what a program reads."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from helpers import N, lua_fn

HELPERS = str(Path(__file__).resolve().parent / "plans_nngraph.lua")

_H = lua_fn("""function(path)
  package.loaded['plans_nngraph_helpers'] = package.loaded['plans_nngraph_helpers'] or dofile(path)
  return package.loaded['plans_nngraph_helpers']
end""")


@pytest.fixture(scope="module")
def h(lua) -> Any:
    return _H(HELPERS)


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
