"""Training-mode plans for conv nets (lua/nn/util/plan_train.lua, backend family nn_plan): several
training steps (forward, criterion, backward, updateParameters) of a planned model against the same
model run layer by layer (nn.plans.enabled = false) and against a Double twin run layer by layer
(the exact values, to float64 rounding): outputs, every module's output and gradInput read after
a step, the weights' gradients, the weights, the batch norms' running statistics, save_mean and
save_std; plans dropped when the mode, the input's sizes or a module's fields change; a bad input
or gradient raises torch7's error.

Tolerances. The planned run computes the same arithmetic as the layer-by-layer Float run in another
order (oneDNN's blocked sums, the batch norm and its ReLU in one pass), each rounded to float32
(a relative 6e-8 per operation). A training step's gradients amplify that rounding: a batch norm
over few values per channel subtracts nearly equal sums, so the layer-by-layer Float run itself
differs from the exact (Double) values by up to some 1e-2 relative on ResNet-18's weight gradients
at batch 2. So each planned value must lie as close to the exact one as the layer-by-layer Float
value does, within a factor (ERR_FACTOR) for the different order of the sums, plus FLOOR (a few
float32 roundings of the value's magnitude) where the Float run happens to land on the exact one.
The factor is 10: on values that cancel to nearly nothing (a batch norm's bias gradient, about
1e-16 in Double) and at batch 2, one thread's planned sums measured up to 7.4x the layer-by-layer
run's distance (a wrong value is off by its own magnitude, not by rounding). Both runs use one
thread, so the comparison does not follow the machine's load."""
from pathlib import Path

import pytest

from helpers import lua_fn

available = lua_fn("""function()
  require 'nn'
  return require('torch.backend').cpu.plan_conv_supported(torch.FloatTensor(1))
end""")
pytestmark = pytest.mark.skipif(not available(), reason="oneDNN is not installed (pip install 'luabridge[onednn]')")

ERR_FACTOR = 10.0
FLOOR = 1e-6

HARNESS = r"""
require 'nn'
local planConv = require 'nn.util.plan_conv'
local H = {}

-- the models (tests/plan_models.lua, shared with test_plans_conv.py): fb.resnet.torch's basic
-- blocks with the corners of what a training plan serves, cifar.torch's vgg_bn_drop, the
-- residual blocks' other forms, bench/real_models.lua's ResNet-18 as the bench trains it,
-- pre-activation blocks (preresnet.lua's, wide-residual-networks')
local P = dofile('@MODELS@')
function H.resnet() return P.resnet(true) end
function H.vgg() return P.vgg(16, 24) end
H.shortcuts, H.resnet18, H.preresnet, H.wide = P.shortcuts, P.resnet18, P.preresnet, P.wide

-- the resnet (Float, in training, seed 1) and an input batch of n
function H.training(n)
  torch.manualSeed(1)
  local model, sizes = H.resnet()
  model:float():training()
  return model, torch.FloatTensor(n, unpack(sizes)):normal()
end

local function copyOf(v) return P.copyOf(v, true) end

-- what a program can read after a step: every module's output and gradInput, the gradients,
-- the batch norms' statistics
local function observed(model)
  local r = {}
  for _, m in ipairs(model:listModules()) do
    r[#r + 1] = copyOf(m.output); r[#r + 1] = copyOf(m.gradInput)
    if torch.typename(m) == 'nn.SpatialBatchNormalization' then
      r[#r + 1] = copyOf(m.running_mean); r[#r + 1] = copyOf(m.running_var)
      r[#r + 1] = copyOf(m.save_mean); r[#r + 1] = copyOf(m.save_std)
    end
  end
  local _, g = model:parameters()
  r[#r + 1] = copyOf(g)
  return r
end

-- flat list of tensors in v
local function flat(v, out)
  out = out or {}
  if torch.type(v) == 'table' then for _, x in ipairs(v) do flat(x, out) end
  elseif torch.isTensor(v) then out[#out + 1] = v end
  return out
end

-- steps of training from the same start: the values after each step ([step] = list), whether the
-- plan ran (every step after the first), and how many modules a planned backward left lazy.
-- quiet: the steps read only the parameters, their gradients and the statistics (nothing
-- materializes) but for the last, which reads everything; split: the backward as
-- updateGradInput then accGradParameters (layer by layer after a planned forward)
function H.train(name, batch, steps, how, quiet, split, alternate)
  torch.manualSeed(1)
  local model, sizes, classes = H[name]()
  local x = torch.FloatTensor(batch, unpack(sizes)):normal()
  local y = torch.LongTensor(batch):random(1, classes)
  local criterion = nn.CrossEntropyCriterion()
  if how == 'double' then model:double(); criterion:double(); x = x:double()
  else model:float(); criterion:float() end
  model:training()
  nn.plans.enabled = how == 'planned'
  local planned, lazy, refs = {}, 0, 0
  local results = {}
  local blas = require 'torch.backend.cpu.blas'
  local watch, threads = blas.watchLoad, torch.getnumthreads()
  -- one thread unless alternating: the count blas.threadsFor would pick follows the machine's
  -- load, and oneDNN splits a batch norm's sums by it, so the runs compared would round apart
  blas.watchLoad = false
  torch.setnumthreads(1)
  for s = 1, steps do
    if alternate then   -- 1, 2, 1, ... threads: a plan's exes per thread count share buffers
      torch.setnumthreads(2 - s % 2)
    end
    model:zeroGradParameters()
    local out = model:forward(x)
    criterion:forward(out, y)
    if split then
      local go = criterion:backward(out, y)
      model:updateGradInput(x, go)
      model:accGradParameters(x, go)
    else
      model:backward(x, criterion:backward(out, y))
    end
    planned[s] = planConv.planned(model)
    if s == steps then
      local function walk(m)   -- raw reads: nothing materializes
        if rawget(m, 'gradInput') == nil and m ~= model.modules[1] then lazy = lazy + 1 end
        for _, c in ipairs(rawget(m, 'modules') or {}) do walk(c) end
      end
      walk(model)
    end
    if quiet and s < steps then
      local _, g = model:parameters()
      local r = { copyOf(g) }
      for _, bn in ipairs(model:findModules('nn.SpatialBatchNormalization')) do
        r[#r + 1] = copyOf(bn.running_mean); r[#r + 1] = copyOf(bn.running_var)
      end
      results[s] = flat(r)
    else
      results[s] = flat(observed(model))
    end
    for _, list in ipairs(require('nn.util.plan_train').steps(model)) do
      for _, name in ipairs(list) do if name:find('ref:') then refs = refs + 1 end end
    end
    model:updateParameters(0.05)
  end
  results[steps + 1] = flat(observed(model))   -- reading changed nothing: the weights after it
  nn.plans.enabled = true
  blas.watchLoad = watch
  torch.setnumthreads(threads)
  return results, planned, lazy, refs
end

-- The worst (planned - exact) / (float - exact + floor) ratio, and the values where it is worst:
-- each value's error against the Double run measured in units of the layer-by-layer Float run's
-- error (floor * its magnitude at least).
function H.compare(name, batch, steps, factor, floor, quiet, split, alternate)
  local P, planned, lazy, refs = H.train(name, batch, steps, 'planned', quiet, split, alternate)
  local E = H.train(name, batch, steps, 'eager', quiet, false, alternate)
  local D = H.train(name, batch, steps, 'double', quiet, false, alternate)
  local worst, where = 0, ''
  for s = 1, #D do
    assert(#P[s] == #D[s] and #E[s] == #D[s], 'different numbers of values')
    for i = 1, #D[s] do
      local p, e, d = P[s][i], E[s][i], D[s][i]
      assert(p:isSameSizeAs(d) and e:isSameSizeAs(d), 'sizes differ')
      if d:nElement() > 0 then
        local scale = d:clone():abs():max()
        local errP = (p - d):abs():max()
        local errE = (e - d):abs():max()
        local ratio = errP / (factor * errE + floor * math.max(scale, 1e-3))
        if ratio > worst then
          worst, where = ratio, ('step %d value %d: planned off by %.3g, float by %.3g, magnitude %.3g')
            :format(s, i, errP, errE, scale)
        end
      end
    end
  end
  return worst, where, planned, lazy, refs
end

-- A change after planned steps: the next steps against a twin with the same change, both Float
function H.afterChange(code)
  local change = loadstring('return ' .. code)()
  local function run(planned)
    local model, x = H.training(4)
    nn.plans.enabled = planned
    local function step(input)
      model:zeroGradParameters()
      local out = model:forward(input)
      local go = out:clone():fill(0.1)
      model:backward(input, go)
      local _, g = model:parameters()
      return { out:clone(), copyOf(g) }
    end
    step(x); step(x)
    local x1 = change(model, x) or x
    local r = { step(x1), step(x1) }
    local didPlan = planConv.planned(model)
    nn.plans.enabled = true
    return r, didPlan
  end
  local a, planned = run(true)
  local b = run(false)
  local worst = 0
  local fa, fb = flat(a), flat(b)
  for i = 1, #fb do
    local d = (fa[i]:double() - fb[i]:double()):abs():max() / math.max(1, fb[i]:clone():abs():max())
    worst = math.max(worst, d)
  end
  return worst, planned
end

return H
""".replace("@MODELS@", str(Path(__file__).resolve().parent / "plan_models.lua"))

harness = lua_fn("function(code) return loadstring(code)() end")
_H = {}


def H():  # noqa: N802 - the Lua harness table
    if "h" not in _H:
        _H["h"] = harness(HARNESS)
    return _H["h"]


@pytest.mark.parametrize("name,batch,steps,quiet", [
    ("resnet", 4, 4, False), ("resnet", 2, 3, False), ("resnet", 3, 4, True), ("vgg", 5, 3, False),
    ("resnet18", 2, 3, False), ("shortcuts", 3, 3, False), ("preresnet", 3, 3, False), ("wide", 2, 3, False),
])
def test_training_steps_match_layer_by_layer(name: str, batch: int, steps: int, quiet: bool) -> None:
    worst, where, planned, lazy, refs = H().compare(name, batch, steps, ERR_FACTOR, FLOOR, quiet, False)
    assert refs == 0, "a step of the plan runs oneDNN's reference kernel (seconds where jit takes ms)"
    planned = [planned[i + 1] for i in range(steps)]
    assert planned == [True] * steps, "every step runs the plan (the first makes it, then runs it)"
    assert lazy > 0, "a planned backward leaves the inner modules' gradInput lazy"
    assert worst <= 1, f"{name}: {where}"


def test_split_backward_after_planned_forward() -> None:
    # updateGradInput + accGradParameters read the modules' outputs: they materialize, and the
    # running statistics stay those of one forward per step
    worst, where, planned, _, _ = H().compare("resnet", 3, 3, ERR_FACTOR, FLOOR, False, True)
    assert planned[2] and planned[3]
    assert worst <= 1, where


def test_thread_counts_alternate() -> None:
    worst, where, planned, _, _ = H().compare("resnet", 4, 5, ERR_FACTOR, FLOOR, True, False, True)
    assert all(planned[i] for i in range(2, 6))
    assert worst <= 1, where


CHANGES = {
    "mode": "function(m) m:evaluate(); m:training() end",
    "input size": "function(m, x) return x:narrow(1, 1, 3):clone() end",
    "bn momentum": "function(m) m:findModules('nn.SpatialBatchNormalization')[3].momentum = 0.5 end",
    "weight replaced": "function(m) local c = m:findModules('nn.SpatialConvolution')[2]; "
                       "c.weight = c.weight:clone():mul(-1) end",
    "gradWeight replaced": "function(m) local c = m:findModules('nn.SpatialConvolution')[4]; "
                           "c.gradWeight = c.gradWeight:clone() end",
    "module replaced": "function(m) m.modules[3] = nn.Tanh():float() end",
    "one module evaluates": "function(m) m:findModules('nn.SpatialBatchNormalization')[1]:evaluate() end",
    "getParameters": "function(m) local p = m:getParameters(); p:mul(0.9) end",
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_plan_follows_changes(change: str) -> None:
    worst, planned = H().afterChange(CHANGES[change])
    assert worst < 1e-4, change
    assert planned, "planned again after the change"


errors = lua_fn(r"""function(H)
  local model, x = H.training(2)
  for _ = 1, 2 do model:forward(x); model:backward(x, model.output:clone():fill(1)) end
  model:forward(x)
  local ok1, e1 = pcall(function() return model:backward(x, torch.FloatTensor(2, 7):fill(1)) end)
  local ok2, e2 = pcall(function() return model:forward(torch.FloatTensor(2, 4, 20, 20):normal()) end)
  -- still usable, planned again
  model:forward(x); model:backward(x, model.output:clone():fill(1))
  model:forward(x); model:backward(x, model.output:clone():fill(1))
  return ok1, tostring(e1), ok2, tostring(e2), require('nn.util.plan_conv').planned(model)
end""")


def test_bad_input_clear_error() -> None:
    ok1, e1, ok2, e2, planned = errors(H())
    assert not ok1 and "nn.Linear" in e1 and "7" in e1
    assert not ok2 and "nn.SpatialConvolution" in e2 and "4" in e2
    assert planned


variants = lua_fn(r"""function(H, variant)
  local function run(planned)
    local model, x = H.training(3)
    nn.plans.enabled = planned
    local r = {}
    for s = 1, 3 do
      model:zeroGradParameters()
      local out = model:forward(x)
      local go = out:clone():fill(0.2)
      if variant == 'scale' then model:backward(x, go, 0.5)
      else model:backward(x:clone(), go) end   -- another tensor than the forward's: layer by layer
      local _, g = model:parameters()
      for i = 1, #g do r[#r + 1] = g[i]:clone() end
      r[#r + 1] = model.gradInput:clone()
      model:updateParameters(0.05)
    end
    nn.plans.enabled = true
    return r
  end
  local a, b = run(true), run(false)
  local worst = 0
  for i = 1, #a do
    worst = math.max(worst, (a[i]:double() - b[i]:double()):abs():max() / math.max(1, b[i]:clone():abs():max()))
  end
  return worst
end""")


@pytest.mark.parametrize("variant", ["scale", "other input"])
def test_backward_scale_and_other_input(variant: str) -> None:
    # scale: the gradients accumulate scale times theirs, as torch7's; a backward of another
    # input tensor than the planned forward's runs layer by layer (its outputs materialize)
    assert variants(H(), variant) < 1e-4


memory = lua_fn(r"""function(H)
  local model, x = H.training(4)
  local planTrain = require 'nn.util.plan_train'
  local blas = require 'torch.backend.cpu.blas'
  local watch, threads = blas.watchLoad, torch.getnumthreads()
  blas.watchLoad = false
  torch.setnumthreads(1)
  local kept, planned = {}, {}
  for s = 1, 4 do
    model:zeroGradParameters()
    local out = model:forward(x)
    kept[#kept + 1] = planTrain.memory(model).lazy
    model:backward(x, out:clone():fill(0.1))
    kept[#kept + 1] = planTrain.memory(model).lazy
    planned[s] = require('nn.util.plan_conv').planned(model)
    -- step 2 reads an inner output and gradInput (the modules materialize, and hold them again)
    if s == 2 then
      local conv = model:findModules('nn.SpatialConvolution')[3]
      assert(conv.output:nElement() > 0 and conv.gradInput:nElement() > 0)
    end
    model:updateParameters(0.05)
  end
  local m = planTrain.memory(model)
  blas.watchLoad = watch
  torch.setnumthreads(threads)
  return kept, planned, m.buffers, m.pool
end""")


def test_plan_keeps_no_layer_by_layer_tensors() -> None:
    # a planned step's lazy modules keep none of the layer-by-layer run's tensors (the values
    # read after it are the tests above's), and the backward's buffers share memory with the
    # activations it is done with
    kept, planned, buffers, pool = memory(H())
    assert all(planned.values())
    assert list(kept.values()) == [0] * 8
    assert 0 < pool < 0.7 * buffers
