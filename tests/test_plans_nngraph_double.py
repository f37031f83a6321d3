"""nngraph plans on Double gModules (lua/nngraph/plan.lua, the nn_chain backend family): torch's
default tensor type, what char-rnn trains in on the CPU. The chains run numpy's float64 loops,
and Sigmoid and Tanh through the Tensor method's own pass (the module's), so a planned run
reads, to the bit, as the layer-by-layer run (nn.plans.enabled false): every module's output
and gradInput, the parameters and their gradients. Then mixed element types: a Float gradient
reaching a Double gModule, a Float tensor beside Double ones, Float inputs after a Double plan:
the kernel declines (or the node is no member) and everything runs, and reads, as before."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from helpers import N, lua_fn
from test_plans_nngraph import h  # noqa: F401  (the fixture: tests/plans_nngraph.lua's helpers)

# Returns: the largest difference, whether the lists match in sizes, how many tensors differ in
# any bit, the planned forward and backward calls of the last rep, the readable tensors' count,
# and the fused chains of one clone's plan.
_THROUGH_TIME = lua_fn("""function(H, kind, vocab, hidden, layers, dropout, steps, batch, train, onehot)
  local off, on, nf, nb, proto, input = H.throughTimeCase(kind, 'double', vocab, hidden, layers, dropout, steps,
    batch, train, onehot)
  local diff, same = H.difference(off, on)
  local unequal = 0
  for i = 1, math.min(#off, #on) do
    if off[i]:type() ~= on[i]:type() or not off[i]:equal(on[i]) then unequal = unequal + 1 end
  end
  local m = proto:clone()   -- the chains one Double clone fuses
  m:forward(input); m:forward(input)
  local P = H.plan.of(m)
  return diff, same, unequal, nf, nb, #on, P and #P.fchains or 0, off[1]:type()
end""")


@pytest.mark.parametrize("kind", ["lstm", "gru", "rnn"])
@pytest.mark.parametrize("train", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("onehot", [True, False], ids=["onehot", "dense"])
def test_double_char_rnn_models_through_time(h: Any, kind: str, train: bool, onehot: bool) -> None:
    """char-rnn's LSTM, GRU and RNN in Double (2 layers, clones sharing parameters over 4 steps,
    state passed on): the planned run equals the layer-by-layer run bit for bit."""
    diff, same, unequal, nf, nb, count, fused, typ = _THROUGH_TIME(
        h, kind, 11, 8, 2, 0, 4, 5, train, onehot)
    assert typ == "torch.DoubleTensor"
    assert same and count > 50
    assert unequal == 0 and diff == 0
    assert nf == 4                    # every clone's forward ran its plan
    assert nb == (4 if train else 0)  # and its backward
    assert fused >= (3 if onehot else 2)   # one chain per layer (and OneHot's own)


def test_double_large_gates_and_dropout(h: Any) -> None:
    """Gates past the Tensor method's numpy threshold (8 x 96 elements, strided rows of a
    8 x 384 sum: numpy's float64 loops row by row), Dropout between layers, batch 1."""
    for kind, hidden, batch, dropout in (("lstm", 96, 8, 0.5), ("gru", 80, 8, 0), ("lstm", 6, 1, 0)):
        diff, same, unequal, nf, nb, _, fused, _ = _THROUGH_TIME(
            h, kind, 13, hidden, 2, dropout, 3, batch, True, True)
        assert same and unequal == 0 and diff == 0, (kind, hidden)
        assert nf == 3 and nb == 3 and fused >= 3


_MIXED = lua_fn("""function(H, enabled, case)
  H.plans.enabled = enabled
  torch.manualSeed(9)
  local m, input, gradOutput, later
  if case == 'float_gradient' then
    -- a Float gradient reaching the Double chain from outside: the backward kernel declines
    local x = nn.Identity()()
    local y = nn.Tanh()(nn.Sigmoid()(nn.Linear(4, 4)(x)))
    m = nn.gModule({ x }, { y }):double()
    input, gradOutput = torch.DoubleTensor(3, 4):normal(), torch.FloatTensor(3, 4):normal()
  elseif case == 'copy_inside' then
    -- a Float tensor made inside a Double graph (nn.Copy) beside the Double chain
    local x = nn.Identity()()
    local f = nn.Copy('torch.DoubleTensor', 'torch.FloatTensor')(x)
    local y = nn.CAddTable()({ nn.Sigmoid()(x), nn.Tanh()(f) })
    m = nn.gModule({ x }, { y }):double()
    input, gradOutput = torch.DoubleTensor(3, 4):normal(), torch.DoubleTensor(3, 4):normal()
  else
    -- planned on Double gradients, then handed a Float one: declined per call, dropped
    local x = nn.Identity()()
    local y = nn.CMulTable()({ nn.Sigmoid()(nn.Linear(4, 4)(x)), nn.Tanh()(x) })
    m = nn.gModule({ x }, { y }):double()
    input, gradOutput = torch.DoubleTensor(3, 4):normal(), torch.DoubleTensor(3, 4):normal()
    later = gradOutput:float()
  end
  local fused, backwardPlanned = 0, false
  for rep = 1, 4 do
    m:forward(input)
    m:backward(input, (rep == 4 and later) or gradOutput)
    if rep == 3 then
      local P = H.plan.of(m)
      fused, backwardPlanned = P and #P.fchains or 0, P ~= nil and P.bsteps ~= nil
    end
  end
  local list = {}
  for _, mod in ipairs(m:listModules()) do
    for _, t in ipairs({ mod.output, mod.gradInput }) do
      if torch.isTensor(t) then list[#list + 1] = t:clone() end
      if type(t) == 'table' then for _, v in ipairs(t) do list[#list + 1] = v:clone() end end
    end
  end
  local _, grads = m:parameters()
  for _, g in ipairs(grads or {}) do list[#list + 1] = g:clone() end
  H.plans.enabled = true
  return list, fused, backwardPlanned, H.plan.of(m) ~= nil
end""")

_EQUAL = lua_fn("""function(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do
    if a[i]:type() ~= b[i]:type() or not a[i]:isSameSizeAs(b[i]) or not a[i]:equal(b[i]) then return false end
  end
  return true
end""")


@pytest.mark.parametrize("case", ["float_gradient", "copy_inside", "gradient_turns_float"])
def test_mixed_types_decline(h: Any, case: str) -> None:
    off, _, _, _ = _MIXED(h, False, case)
    on, fused, backward_planned, kept = _MIXED(h, True, case)
    assert _EQUAL(off, on)
    if case == "float_gradient":
        assert fused == 1 and not backward_planned   # the forward fused, the backward declined
    elif case == "copy_inside":
        assert fused == 1                 # the Double chain (Sigmoid, CAddTable); Tanh's Float input is outside
    else:
        assert fused == 1 and backward_planned and not kept   # declined per call, then dropped


_FLOAT_AFTER_DOUBLE = lua_fn("""function(H, enabled)
  H.plans.enabled = enabled
  torch.manualSeed(4)
  local m = H.lstm(6, 4, 1, 0, false):double()
  local good = { torch.DoubleTensor(2, 6):normal(), torch.DoubleTensor(2, 4):normal(), torch.DoubleTensor(2, 4):normal() }
  m:forward(good); m:forward(good)
  local fused = H.plan.of(m) and #H.plan.of(m).fchains or 0
  local ok, err = pcall(function()
    return m:forward({ good[1]:float(), good[2]:float(), good[3]:float() })
  end)
  local out = m:forward(good)[2]:clone()
  H.plans.enabled = true
  return ok, tostring(err), out, fused
end""")


def test_float_inputs_after_a_double_plan(h: Any) -> None:
    """Float inputs to a planned Double gModule: the plan is dropped and the modules raise their
    own error, as without plans; the gModule then plans and runs Double again."""
    off, on = _FLOAT_AFTER_DOUBLE(h, False), _FLOAT_AFTER_DOUBLE(h, True)
    assert on[3] == 1 and off[3] == 0
    assert not off[0] and not on[0] and on[1] == off[1]
    assert np.array_equal(N(on[2]), N(off[2]))
