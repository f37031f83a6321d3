"""The first forward of an evaluation-mode conv-net plan (lua/nn/util/plan_conv.lua) gives the same
bits as every later forward of the same input. The plan rounds float32 otherwise than the layers
(the fused batch norm, oneDNN's post-ops), so a first forward run layer by layer and a second one
planned differed in the last bits, and a program comparing two forwards exactly failed: optnet's
own tests (fmassa/optimize-net, `optnet.test{'resnet20'}`: "Outputs differ after optimization of
resnet, max diff=1.4e-06, tolerance=0").

The first forward now runs layer by layer (to make the plan), then the plan, whose output it
returns, where every module run between segments has nn's or cudnn's own forward; a module of the
program's there (it may count, print or draw) keeps the old order: layer by layer once, planned from
the second forward on. Where the plan cannot run after all (oneDNN refuses a step), the forward is
the layers' own throughout."""
from __future__ import annotations

from typing import Iterator

import pytest

from helpers import lua_fn
from test_plans_cover import SHORTCUT_A, TABLES, needs_onednn
from test_plans_real_models import TOL

_PIN = lua_fn(r"""function(watch, threads)
  local blas = require 'torch.backend.cpu.blas'
  local was, count = blas.watchLoad, torch.getnumthreads()
  blas.watchLoad = watch
  torch.setnumthreads(threads)
  return was, count
end""")


@pytest.fixture(autouse=True)
def one_thread() -> Iterator[None]:
    """Every forward on one thread: the count blas.threadsFor picks follows the machine's load,
    and oneDNN splits a batch norm's sums by it, so two forwards would round apart where the
    count changed between them."""
    watch, count = _PIN(False, 1)
    yield
    _PIN(watch, count)


PLAIN = r"""function()
  local model = nn.Sequential():add(nn.SpatialConvolution(3, 8, 3, 3, 1, 1, 1, 1))
    :add(nn.SpatialBatchNormalization(8)):add(nn.ReLU(true))
    :add(nn.SpatialConvolution(8, 8, 3, 3, 1, 1, 1, 1)):add(nn.SpatialBatchNormalization(8)):add(nn.ReLU(true))
    :add(nn.SpatialMaxPooling(2, 2, 2, 2)):add(nn.View(8 * 6 * 6)):add(nn.Linear(8 * 6 * 6, 4))
  return model:float(), { 3, 12, 12 }
end"""

# the model's twin (a clone before any forward) and the twin's layer-by-layer output for a batch
# of 2 normal inputs: twin, x, layers
TWIN = r"""local function twinOf(model, sizes)
  local twin = model:clone()
  local x = torch.FloatTensor(2, unpack(sizes)):normal()
  nn.plans.enabled = false
  local layers = twin:forward(x):clone()
  nn.plans.enabled = true
  return twin, x, layers
end
"""

# (the two forwards' largest difference, planned after the first forward, the layers' difference
# from the plan's first output, the number of Float values compared)
_FORWARDS = lua_fn(r"""function(builder)
  require 'nn'
""" + TWIN + r"""
  local planConv = require 'nn.util.plan_conv'
  torch.manualSeed(5)
  local model, sizes = loadstring('return ' .. builder)()()
  for _, bn in ipairs(model:findModules('nn.SpatialBatchNormalization')) do
    bn.running_mean:uniform(-0.2, 0.2); bn.running_var:uniform(0.5, 2)
    bn.weight:uniform(0.5, 1.5); bn.bias:uniform(-0.2, 0.2)
  end
  model:evaluate()
  local twin, x, layers = twinOf(model, sizes)
  local first = model:forward(x):clone()
  local plannedFirst = planConv.planned(model)
  local second = model:forward(x):clone()
  return (first - second):abs():max(), plannedFirst, (first - layers):abs():max() / layers:abs():max(),
    first:nElement()
end""")


@needs_onednn
@pytest.mark.parametrize("builder", [PLAIN, SHORTCUT_A, TABLES], ids=["plain", "shortcut_A", "tables"])
def test_first_forward_equals_the_next_bit_for_bit(builder: str) -> None:
    same, planned_first, off, n = _FORWARDS(builder)
    assert n > 0
    assert planned_first, "the first forward did not run the plan"
    assert same == 0.0, f"the first and second forwards of one input differ by {same}"
    assert off < TOL, f"the planned output is {off} (relative) from the layer-by-layer run"


# a module of the program's between two segments: its forward runs once per forward
_PROGRAM_MODULE = lua_fn(r"""function()
  require 'nn'
  local planConv = require 'nn.util.plan_conv'
  if not nn.TestCountedIdentity then
    local Counted = torch.class('nn.TestCountedIdentity', 'nn.Module')
    function Counted:updateOutput(input)
      self.calls = (self.calls or 0) + 1
      self.output = input
      return input
    end
  end
  torch.manualSeed(6)
  local counted = nn.TestCountedIdentity()
  local model = nn.Sequential():add(nn.SpatialConvolution(3, 8, 3, 3, 1, 1, 1, 1))
    :add(nn.SpatialBatchNormalization(8)):add(nn.ReLU(true)):add(counted)
    :add(nn.SpatialConvolution(8, 8, 3, 3, 1, 1, 1, 1)):add(nn.ReLU(true))
  model:float():evaluate()
  local x = torch.FloatTensor(2, 3, 10, 10):normal()
  model:forward(x)
  local afterOne, plannedOne, why = counted.calls, planConv.planned(model), planConv.why(model)
  model:forward(x); model:forward(x)
  return afterOne, plannedOne, tostring(why), counted.calls, planConv.planned(model)
end""")


@needs_onednn
def test_a_program_module_between_segments_runs_once_a_forward() -> None:
    after_one, planned_one, why, after_three, planned_three = _PROGRAM_MODULE()
    assert after_one == 1, f"the program's module ran {after_one} times in the first forward"
    assert not planned_one and "the program's" in why, why
    assert after_three == 3
    assert planned_three


# oneDNN refusing a step when the first forward runs the plan: the layers' values, the plan dropped
_REFUSED = lua_fn(r"""function(builder)
  require 'nn'
""" + TWIN + r"""
  local planConv = require 'nn.util.plan_conv'
  local cpu = require('torch.backend').cpu
  torch.manualSeed(7)
  local model, sizes = loadstring('return ' .. builder)()()
  model:evaluate()
  local twin, x, layers = twinOf(model, sizes)
  local compile = cpu.plan_conv_compile
  cpu.plan_conv_compile = function() return nil, 'refused by the test' end
  local ok, out = pcall(function() return model:forward(x):clone() end)
  cpu.plan_conv_compile = compile
  assert(ok, out)
  local planned, why = planConv.planned(model), tostring(planConv.why(model))
  local inner = (model.modules[2].output - twin.modules[2].output):abs():max()
  return (out - layers):abs():max(), planned, why, inner
end""")


@needs_onednn
def test_a_refused_first_run_gives_the_layers_values() -> None:
    diff, planned, why, inner = _REFUSED(PLAIN)
    assert diff == 0.0 and inner == 0.0, (diff, inner)
    assert not planned
    assert "refused by the test" in why, why



# Training mode (nn/util/plan_train.lua): the first forward restores the running statistics and
# the generator before it runs the new plan, so it changes them once, as one forward does.
_TRAINING = lua_fn(r"""function(withDropout)
  require 'nn'
  local planConv = require 'nn.util.plan_conv'
  torch.manualSeed(8)
  local function branch(n)
    return nn.Sequential():add(nn.SpatialConvolution(8, n, 3, 3, 1, 1, 1, 1))
      :add(nn.SpatialBatchNormalization(n)):add(nn.ReLU(true))
  end
  local model = nn.Sequential():add(nn.SpatialConvolution(3, 8, 3, 3, 1, 1, 1, 1))
    :add(nn.SpatialBatchNormalization(8)):add(nn.ReLU(true))
  if withDropout then model:add(nn.Dropout(0.3)) end
  -- a Concat between segments (run as it is), with batch norms of its own inside
  model:add(nn.Concat(2):add(branch(4)):add(branch(6)))
    :add(nn.SpatialConvolution(10, 8, 3, 3, 1, 1, 1, 1)):add(nn.SpatialBatchNormalization(8)):add(nn.ReLU(true))
  model:float():training()
  local twin = model:clone()
  local x = torch.FloatTensor(4, 3, 10, 10):normal()
  local function stats(m)
    local list = {}
    for _, bn in ipairs(m:findModules('nn.SpatialBatchNormalization')) do
      list[#list + 1] = bn.running_mean:clone(); list[#list + 1] = bn.running_var:clone()
    end
    return list
  end
  local before = stats(model)
  torch.manualSeed(9)
  nn.plans.enabled = false
  local layers = twin:forward(x):clone()
  local twinDraw = torch.uniform()
  nn.plans.enabled = true
  torch.manualSeed(9)
  local first = model:forward(x):clone()
  local draw = torch.uniform()
  local planned = planConv.planned(model)
  -- the statistics moved once: as far from where they were as the twin's, to rounding
  local worstStat, moved = 0, 0
  local mine, theirs = stats(model), stats(twin)
  for i = 1, #mine do
    worstStat = math.max(worstStat, (mine[i] - theirs[i]):abs():max())
    moved = math.max(moved, (theirs[i] - before[i]):abs():max())
  end
  local second = model:forward(x):clone()
  return planned, (first - second):abs():max(), (first - layers):abs():max() / layers:abs():max(),
    draw == twinDraw, worstStat, moved
end""")


@needs_onednn
def test_training_first_forward_runs_the_plan_once() -> None:
    planned, same, off, same_draw, worst_stat, moved = _TRAINING(False)
    assert planned, "the first training forward did not run the plan"
    assert same == 0.0, f"the first and second training forwards of one input differ by {same}"
    assert off < TOL, off
    assert same_draw
    assert moved > 1e-3, moved   # the statistics do move in one forward (momentum 0.1)
    assert worst_stat < 1e-5, f"running statistics {worst_stat} from one layer-by-layer forward's"


@needs_onednn
def test_training_first_forward_with_dropout_draws_once() -> None:
    """Dropout between segments draws its mask again from the same state: the same mask as the
    layer-by-layer run, and the generator where one forward leaves it."""
    planned, _, off, same_draw, worst_stat, _ = _TRAINING(True)
    assert planned
    assert off < TOL, off
    assert same_draw, "the generator is not where one forward leaves it"
    assert worst_stat < 1e-5, worst_stat
