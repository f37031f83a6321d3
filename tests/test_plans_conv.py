"""Whole-model plans for conv nets (lua/nn/util/plan_conv.lua, backend family nn_plan): every
planned model against the same model run layer by layer (nn.plans.enabled = false): the output,
every module's output (read after the planned forward: skipped ones are materialized on read),
gradients after an evaluation-mode backward, a training-mode step (its first forward runs layer by layer:
planned training steps are tests/test_plans_train.py's); plans
dropped when the tree, a module's fields, the weights' values, the input's sizes or the mode
change; torch.type / isTypeOf / clearState / torch.save on a model that ran planned; a failed
forward raises torch7's error and leaves the model usable."""
from pathlib import Path

import pytest

from helpers import lua_fn

available = lua_fn("""function()
  require 'nn'
  return require('torch.backend').cpu.plan_conv_supported(torch.FloatTensor(1))
end""")
pytestmark = pytest.mark.skipif(not available(), reason="oneDNN is not installed (pip install 'luabridge[onednn]')")

# The models (Float; tests/plan_models.lua, shared with test_plans_train.py), BN statistics and
# affine parameters random so that folding them is visible.
MODELS = r"""
local P = dofile('@MODELS@')
local M = { randomStats = P.randomStats, copyOf = P.copyOf }
function M.resnet() local model, sizes = P.resnet(); return P.randomStats(model:float()), sizes end
function M.vgg() local model, sizes = P.vgg(8, 12); return P.randomStats(model:float()), sizes end
for _, name in ipairs { 'lenet', 'inception', 'dcgan', 'corners' } do M[name] = P[name] end
for _, name in ipairs { 'preresnet', 'wide' } do
  M[name] = function() local model, sizes = P[name](); return P.randomStats(model:float()), sizes end
end
return M
""".replace("@MODELS@", str(Path(__file__).resolve().parent / "plan_models.lua"))

HARNESS = r"""function(models)
  require 'nn'
  local M = loadstring(models)()
  local planConv = require 'nn.util.plan_conv'
  local H = {}

  local maxDiff = dofile('@COMPARE@')
  H.maxDiff = maxDiff

  local copyOf = M.copyOf

  -- every module's output (listModules order), copied
  local function outputs(model)
    local list = {}
    for i, m in ipairs(model:listModules()) do list[i] = copyOf(m.output) end
    return list
  end

  function H.build(name, batch, seed)
    torch.manualSeed(seed or 1)
    local model, sizes = M[name]()
    local x = torch.FloatTensor(batch, unpack(sizes)):normal()
    return model, x
  end

  -- The worst relative difference between the layer-by-layer run and the planned one over the
  -- output and every module's output; whether the second forward ran a plan and left modules
  -- lazy (their output not stored until read).
  function H.compareEval(name, batch)
    local model, x = H.build(name, batch)
    model:evaluate()
    nn.plans.enabled = false
    local ref = copyOf(model:forward(x))
    local refAll = outputs(model)
    nn.plans.enabled = true
    local worst = 0
    local lazy = 0
    local planned
    for run = 1, 3 do
      local out = copyOf(model:forward(x))
      planned = planConv.planned(model)
      worst = math.max(worst, maxDiff(out, ref))
      if run == 3 then
        local function walk(m)   -- raw reads: nothing that materializes
          if rawget(m, 'output') == nil then lazy = lazy + 1 end
          for _, c in ipairs(rawget(m, 'modules') or {}) do walk(c) end
        end
        walk(model)
        local all = outputs(model)
        for i = 1, #refAll do worst = math.max(worst, maxDiff(all[i], refAll[i])) end
      end
    end
    -- the gradients of an evaluation-mode backward after a planned forward
    local go = copyOf(model.output):normal()
    model:zeroGradParameters()
    model:forward(x)
    local gi = copyOf(model:backward(x, go))
    local _, grads = model:parameters()
    grads = copyOf(grads)
    nn.plans.enabled = false
    model:zeroGradParameters()
    model:forward(x)
    local gi2 = copyOf(model:backward(x, go))
    local _, grads2 = model:parameters()
    nn.plans.enabled = true
    worst = math.max(worst, maxDiff(gi, gi2), maxDiff(grads, grads2))
    return worst, planned, lazy
  end

  -- Training mode, plans on and off, from the same start: output, every module's output and
  -- gradInput, the parameters' gradients, BN running statistics.
  function H.compareTrain(name, batch)
    local results = {}
    -- one thread for both runs: the thread count (from the CPUs free at each call) changes how
    -- oneDNN splits a batch norm's sums
    local threads = torch.getnumthreads()
    torch.setnumthreads(1)
    for k, on in ipairs { false, true } do
      local model, x = H.build(name, batch)
      model:training()
      nn.plans.enabled = on
      torch.manualSeed(7)
      local out = model:forward(x)
      local go = copyOf(out):normal()
      model:zeroGradParameters()
      model:backward(x, go)
      local r = { out = copyOf(out), all = outputs(model), grads = {}, stats = {} }
      for i, m in ipairs(model:listModules()) do r.grads[i] = copyOf(m.gradInput) end
      local _, g = model:parameters()
      r.params = copyOf(g)
      for _, bn in ipairs(model:findModules('nn.SpatialBatchNormalization')) do
        r.stats[#r.stats + 1] = bn.running_mean:clone(); r.stats[#r.stats + 1] = bn.running_var:clone()
      end
      results[k] = r
    end
    nn.plans.enabled = true
    torch.setnumthreads(threads)
    local a, b = results[1], results[2]
    return math.max(maxDiff(a.out, b.out), maxDiff(a.all, b.all), maxDiff(a.grads, b.grads),
      maxDiff(a.params, b.params), maxDiff(a.stats, b.stats))
  end

  -- A change made to a model that ran planned (change(model, x) returns the input to use next):
  -- the next forward against the layer-by-layer one after the same change on a twin.
  function H.afterChange(name, change)
    local model, x = H.build('resnet', 2)
    model:evaluate()
    local twin = model:clone()
    nn.plans.enabled = true
    model:forward(x); model:forward(x)
    local planned = planConv.planned(model)
    local x1 = change(model, x)
    local out = copyOf(model:forward(x1))
    out = copyOf(model:forward(x1))
    nn.plans.enabled = false
    local x2 = change(twin, x)
    local ref = copyOf(twin:forward(x2))
    nn.plans.enabled = true
    return maxDiff(out, ref), planned
  end
  return H
end""".replace("@COMPARE@", str(Path(__file__).resolve().parent / "plans_compare.lua"))

harness = lua_fn("function(models, code) return loadstring('return ' .. code)()(models) end")
_H = {}


def H():  # noqa: N802 - the Lua harness table
    if "h" not in _H:
        _H["h"] = harness(MODELS, HARNESS)
    return _H["h"]


TOL = 2e-5


@pytest.mark.parametrize("name,batch,planned", [
    ("resnet", 1, True), ("resnet", 3, True), ("vgg", 1, True), ("vgg", 5, True),
    ("lenet", 1, True), ("lenet", 7, True), ("inception", 2, True), ("dcgan", 3, True),
    ("corners", 1, True), ("corners", 4, True), ("preresnet", 1, True), ("preresnet", 3, True),
    ("wide", 2, True),
])
def test_eval_matches_layer_by_layer(name: str, batch: int, planned: bool) -> None:
    worst, was_planned, lazy = H().compareEval(name, batch)
    assert worst < TOL, f"{name} batch {batch}: planned and layer-by-layer differ by {worst}"
    assert bool(was_planned) == planned
    if planned and name not in ("inception", "dcgan"):   # there a segment is one module
        assert lazy > 0, "a planned forward leaves the modules it skipped lazy"


# A training step's first forward runs its plan too (nn/util/plan_train.lua): the weight and bias
# gradients are sums over the batch and the planes (162 products for the inception model's
# branches) that the plan adds in another order, and batch norm over 2 images amplifies their
# float32 rounding; tests/test_plans_train.py bounds each value by the layer-by-layer run's own
# distance from a Double twin.
TRAIN_TOL = 1e-4


@pytest.mark.parametrize("name,batch", [("resnet", 2), ("vgg", 3), ("lenet", 1), ("inception", 2)])
def test_training_matches_layer_by_layer(name: str, batch: int) -> None:
    assert H().compareTrain(name, batch) < TRAIN_TOL


CHANGES = {
    "weights copied": "function(m, x) local c = m:findModules('nn.SpatialConvolution')[3]; "
                      "c.weight:copy(c.weight:clone():mul(1.5)); return x end",
    "optimizer step": "function(m, x) local p, g = m:parameters(); for i = 1, #p do "
                      "p[i]:mul(1.1):add(0.01) end; return x end",
    "weight replaced": "function(m, x) local c = m:findModules('nn.SpatialConvolution')[2]; "
                       "c.weight = c.weight:clone():mul(-1); return x end",
    "running stats": "function(m, x) local b = m:findModules('nn.SpatialBatchNormalization')[4]; "
                     "b.running_var:mul(3); b.running_mean:add(0.5); return x end",
    "bn eps": "function(m, x) m:findModules('nn.SpatialBatchNormalization')[2].eps = 0.5; return x end",
    "module added": "function(m, x) m.modules[5]:add(nn.ReLU():float()); return x end",
    "module removed": "function(m, x) m:remove(3); return x end",
    "module replaced": "function(m, x) m.modules[3] = nn.Tanh():float(); return x end",
    "branch replaced": "function(m, x) m.modules[5].modules[2].modules[1].modules[2] = "
                       "nn.Identity(); return x end",
    "input size": "function(m, x) return torch.linspace(-2, 2, 3 * 3 * 24 * 24):float():view(3, 3, 24, 24) end",
    "mode": "function(m, x) m:training(); m:evaluate(); m.modules[2]:training(); return x end",
    "getParameters": "function(m, x) local p = m:getParameters(); p:mul(0.9); return x end",
    "input not contiguous": "function(m, x) return x:transpose(3, 4):contiguous():transpose(3, 4) end",
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_plan_follows_changes(change: str) -> None:
    fn = lua_fn(CHANGES[change])
    worst, planned = H().afterChange("resnet", fn)
    assert planned
    assert worst < TOL, f"after {change}: {worst}"


observe = lua_fn(r"""function(H)
  local planConv = require 'nn.util.plan_conv'
  local model, x = H.build('resnet', 2)
  model:evaluate()
  nn.plans.enabled = true
  model:forward(x); model:forward(x)
  local conv = model.modules[1]
  local r = {}
  r.lazyBefore = rawget(conv, 'output') == nil
  r.type = torch.type(conv)
  r.isModule = torch.isTypeOf(conv, 'nn.Module') and torch.isTypeOf(conv, nn.SpatialConvolution)
  r.metatable = getmetatable(conv) == torch.getmetatable('nn.SpatialConvolution')
  r.still = rawget(conv, 'output') == nil       -- none of these materialized it
  r.tostring = tostring(model.modules[2]):match('SpatialBatchNormalization') ~= nil
  -- methods that read no output leave it lazy; the next forward still runs the plan
  model:evaluate()
  local found = #model:findModules('nn.SpatialConvolution')
  r.methodsKeepLazy = rawget(conv, 'output') == nil and found == 10
  model:forward(x)
  r.stillPlanned = planConv.planned(model)
  -- torch.save / load of a model that ran planned, then its forward
  local ref = model:forward(x):clone()
  local f = torch.MemoryFile():binary()
  f:writeObject(model)
  f:seek(1)
  local loaded = f:readObject()
  r.loaded = H.maxDiff(loaded:forward(x), ref)
  -- :clearState() then forward; :type() to Double (runs layer by layer) and back
  model:forward(x)
  model:clearState()
  r.cleared = H.maxDiff(model:forward(x), ref)
  model:forward(x)
  model:double()
  r.double = H.maxDiff(model:forward(x:double()):float(), ref)
  r.doublePlanned = planConv.planned(model)
  model:float()
  model:forward(x)
  r.float = H.maxDiff(model:forward(x), ref)
  return r
end""")


def test_observable_behaviour() -> None:
    r = observe(H())
    assert r["lazyBefore"] and r["still"] and r["methodsKeepLazy"] and r["stillPlanned"]
    assert r["type"] == "nn.SpatialConvolution" and r["isModule"] and r["metatable"] and r["tostring"]
    for key in ("loaded", "cleared", "double", "float"):
        assert r[key] < TOL, key
    assert not r["doublePlanned"]


failing = lua_fn(r"""function(H, planned)
  local model, x = H.build('resnet', 2)
  model:evaluate()
  nn.plans.enabled = planned
  model:forward(x); model:forward(x)
  local ref = model:forward(x):clone()
  local ok, err = pcall(function() return model:forward(x.new(2, 4, 20, 20):normal()) end)
  local after = H.maxDiff(model:forward(x), ref)
  after = math.max(after, H.maxDiff(model:forward(x), ref))
  nn.plans.enabled = true
  return ok, tostring(err):gsub('stack traceback:.*', ''), after
end""")


def test_failed_forward_same_error_model_usable() -> None:
    ok, err, after = failing(H(), True)
    ok2, err2, _ = failing(H(), False)
    assert not ok and not ok2
    assert "nn.SpatialConvolution" in err and "4" in err
    assert err.splitlines()[:3] == err2.splitlines()[:3]
    assert after < TOL


switch_off = lua_fn(r"""function(H)
  local planConv = require 'nn.util.plan_conv'
  local model, x = H.build('resnet', 2)
  model:evaluate()
  nn.plans.enabled = false
  model:forward(x); model:forward(x)
  local lazy = rawget(model.modules[1], 'output') == nil
  nn.plans.enabled = true
  return planConv.planned(model), lazy
end""")


def test_switch_off_runs_layer_by_layer() -> None:
    planned, lazy = switch_off(H())
    assert not planned and not lazy


nested = lua_fn(r"""function(H)
  local planConv = require 'nn.util.plan_conv'
  local model, x = H.build('resnet', 2)
  model:evaluate()
  local twin = model:clone()
  nn.plans.enabled = true
  model:forward(x); model:forward(x)
  -- an inner Sequential forwarded on its own (it plans itself), then the whole model again
  local inner = model.modules[5]
  local mid = model.modules[4].output:clone()
  local a = inner:forward(mid):clone(); a = inner:forward(mid):clone()
  local out = model:forward(x):clone()
  out = model:forward(x):clone()
  nn.plans.enabled = false
  local ref = twin:forward(x):clone()
  local refInner = twin.modules[5]:forward(twin.modules[4].output):clone()
  -- a module met twice in one tree: not planned, still right
  local relu = nn.ReLU():float()
  local conv = nn.SpatialConvolution(3, 3, 3, 3, 1, 1, 1, 1):float()
  local twice = nn.Sequential():add(conv):add(relu):add(conv):add(relu)
  twice:evaluate()
  local y = twice:forward(x):clone()
  nn.plans.enabled = true
  twice:forward(x)
  local y2 = twice:forward(x):clone()
  return math.max(H.maxDiff(out, ref), H.maxDiff(a, refInner), H.maxDiff(y2, y)), planConv.planned(twice)
end""")


def test_inner_container_and_shared_module() -> None:
    worst, twice_planned = nested(H())
    assert worst < TOL
    assert not twice_planned


collected = lua_fn(r"""function(H)
  local seen = setmetatable({}, { __mode = 'k' })
  local function use()   -- in a call of its own: no stack slot keeps the model
    local model, x = H.build('resnet', 1)
    model:evaluate()
    model:forward(x); model:forward(x)
    seen[model] = true
    local _ = model.modules[1].output   -- materialized
    model:forward(x)                     -- and lazy again
  end
  use()
  collectgarbage(); collectgarbage()
  return next(seen) == nil
end""")


def test_planned_model_is_collected() -> None:
    assert collected(H())


preactivation = lua_fn(r"""function(H, name, on)
  local planConv = require 'nn.util.plan_conv'
  planConv.preactivation = on
  local ok, worst, planned = pcall(H.compareEval, name, 2)
  local model, x = H.build(name, 2)
  model:evaluate()
  model:forward(x)
  model:forward(x)
  local pieces = planConv.pieces(model)
  planConv.preactivation = true
  assert(ok, worst)
  return worst, planned, pieces
end""")


@pytest.mark.parametrize("on", [True, False])
@pytest.mark.parametrize("name", ["preresnet", "wide"])
def test_preactivation_blocks_in_one_segment(name: str, on: bool) -> None:
    # pre-activation blocks (batch norm and ReLU before a convolution): with the switch on the
    # whole tree is one segment, each such batch norm one oneDNN pass; off, they run as they are
    worst, planned, pieces = preactivation(H(), name, on)
    assert worst < TOL and planned
    segments = [p for p in pieces.values() if p.startswith("segment")]
    if on:
        assert len(segments) == 1 and " bn" in segments[0], pieces
    else:
        assert len(segments) > 1 and not any(" bn" in s for s in segments), pieces
