"""Training plans' steps against the layer-by-layer run (lua/nn/util/plan_train.lua, backend family
nn_plan), at one thread:

- each convolution's weight gradient is added into the module's gradWeight in the reorder out of
  oneDNN's blocked layout (a reorder with a source scale and a sum post-op: gradWeight = scale *
  gradient + gradWeight) instead of a reorder into a buffer of the plan's and an axpy
  (lua/torch/backend/cpu/nn_plan.lua, trainOptions.fusedAccumulate). The gradients accumulate over
  several steps without zeroing, with backward's scale 1 and 0.5, so that the sum keeps what
  gradWeight held; switch on and off.
- a planned step leaves the modules inside its segments lazy: neither the planned forward nor the
  planned backward, nor the write-version bumps of the backward's parameters
  (lua/torch/core/versions.lua's bumpFields over each batch norm module), reruns the forward
  layer by layer (planConv.reruns counts reruns). A `pairs` over a lazy module reruns it
  (plan_conv.lua), so a bump iterating a module with pairs cost ResNet-18's step at batch 8 some
  300 ms. An inner output read after the steps is the layer-by-layer one."""
from pathlib import Path

import pytest

from helpers import lua_fn

available = lua_fn("""function()
  require 'nn'
  return require('torch.backend').cpu.plan_conv_supported(torch.FloatTensor(1))
end""")
pytestmark = pytest.mark.skipif(not available(), reason="oneDNN is not installed (pip install 'luabridge[onednn]')")

# the test model `name` (tests/plan_models.lua) in training, its data and parameters, planned or
# not; and fn run at one thread (blas.watchLoad off), its settings put back after it
PRELUDE = r"""
require 'nn'
local P = dofile('@MODELS@')
local function setup(name, batch, planned)
  torch.manualSeed(1)
  local model, sizes, classes = P[name](true)
  model:float():training()
  local x = torch.FloatTensor(batch, unpack(sizes)):normal()
  local y = torch.LongTensor(batch):random(1, classes)
  nn.plans.enabled = planned
  local params, grads = model:getParameters()
  return model, x, y, nn.CrossEntropyCriterion():float(), params, grads
end
local function oneThread(fn)
  local blas = require 'torch.backend.cpu.blas'
  local watch, threads = blas.watchLoad, torch.getnumthreads()
  blas.watchLoad = false
  torch.setnumthreads(1)
  local ok, r = pcall(fn)
  blas.watchLoad = watch
  torch.setnumthreads(threads)
  nn.plans.enabled = true
  if not ok then error(r, 0) end
  return unpack(r)
end
local function relDiff(a, b) return (a:double() - b:double()):abs():max() / math.max(1, b:clone():abs():max()) end
""".replace("@MODELS@", str(Path(__file__).resolve().parent / "plan_models.lua"))

accumulate = lua_fn(r"""(function() """ + PRELUDE + r"""
return function(name, batch, scale, fused)
  local options = require('torch.backend.cpu.nn_plan').trainOptions
  local was = options.fusedAccumulate
  local function train(planned)
    local model, x, y, criterion, params, grads = setup(name, batch, planned)
    grads:normal()   -- what the sums add to: the gradients are never zeroed
    local r, names = {}, {}
    for _ = 1, 4 do
      local out = model:forward(x)
      criterion:forward(out, y)
      model:backward(x, criterion:backward(out, y), scale)
      r[#r + 1] = grads:clone()
      for _, list in ipairs(require('nn.util.plan_train').steps(model)) do
        for _, n in ipairs(list) do names[#names + 1] = n end
      end
      params:add(-0.01, grads)
    end
    return r, names, require('nn.util.plan_conv').planned(model)
  end
  options.fusedAccumulate = fused
  local ok, worst, fusedSteps, planned = pcall(oneThread, function()
    local a, names, planned = train(true)
    local b = train(false)
    local worst, fusedSteps = 0, 0
    for i = 1, #a do worst = math.max(worst, relDiff(a[i], b[i])) end
    for _, n in ipairs(names) do if n:find('^reorder%+=') then fusedSteps = fusedSteps + 1 end end
    return { worst, fusedSteps, planned }
  end)
  options.fusedAccumulate = was
  if not ok then error(worst, 0) end
  return worst, fusedSteps, planned
end end)()""")

lazy = lua_fn(r"""(function() """ + PRELUDE + r"""
return function(name, batch)
  local planConv = require 'nn.util.plan_conv'
  local function train(planned)
    local model, x, y, criterion, params, grads = setup(name, batch, planned)
    local bns = model:findModules('nn.SpatialBatchNormalization')
    local lazyCounts, inner, reruns = {}, nil, 0
    for s = 1, 3 do
      local before = planConv.reruns
      grads:zero()
      local out = model:forward(x)
      criterion:forward(out, y)
      model:backward(x, criterion:backward(out, y))
      local n = 0
      for _, m in ipairs(bns) do if rawget(m, 'output') == nil then n = n + 1 end end
      lazyCounts[s] = n
      if s > 1 then reruns = reruns + planConv.reruns - before end
      -- after the last step an inner batch norm's output, read before the update (materialized
      -- where lazy; read after it, it would show the new weights' value)
      if s == 3 then inner = bns[2].output:clone() end
      params:add(-0.01, grads)
    end
    return lazyCounts, inner, #bns, reruns
  end
  return oneThread(function()
    local counts, a, n, reruns = train(true)
    local _, b = train(false)
    return { counts[2], counts[3], relDiff(a, b), n, reruns }
  end)
end end)()""")


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("name,batch,scale", [("resnet", 4, 1.0), ("resnet", 3, 0.5), ("shortcuts", 3, 0.5)])
def test_weight_gradients_accumulate_as_layer_by_layer(name: str, batch: int, scale: float, fused: bool) -> None:
    worst, fused_steps, planned = accumulate(name, batch, scale, fused)
    assert planned, "the steps after the first run the plan"
    if fused:
        assert fused_steps > 0, "the plan adds the weight gradients in its reorders"
    else:
        assert fused_steps == 0, "with the switch off the plan reorders into a buffer and adds after"
    # float32 sums in another order over 4 steps of gradients of magnitude ~1 (the normal start)
    assert worst < 1e-4, f"{name}: planned gradients differ from layer by layer by {worst:.3g}"


@pytest.mark.parametrize("name,batch", [("resnet", 3), ("shortcuts", 3)])
def test_planned_steps_leave_inner_modules_lazy(name: str, batch: int) -> None:
    lazy2, lazy3, diff, count, reruns = lazy(name, batch)
    assert reruns == 0, f"{name}: planned steps 2 and 3 reran the forward layer by layer {reruns} times"
    # the first step plans (layer by layer, then the plan); the next two run the plan
    assert lazy2 > 0 and lazy3 > 0, f"{name}: of {count} batch norms none stayed lazy: {lazy2}, {lazy3}"
    assert diff < 1e-3, f"{name}: an inner output read after planned steps differs by {diff:.3g}"
