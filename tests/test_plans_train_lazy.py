"""A planned training step leaves the modules inside its segments lazy (lua/nn/util/plan_train.lua):
neither the planned forward nor the planned backward, nor the write-version bumps of the
backward's parameters (lua/torch/core/versions.lua's bumpFields over each batch norm module),
reruns the forward layer by layer. A `pairs` over a lazy module reruns it (plan_conv.lua), so a
bump iterating a module with pairs cost ResNet-18's step at batch 8 some 300 ms; this checks that
the inner modules still lack their outputs after each planned step, and that reading one then
gives the layer-by-layer value (planConv.reruns counts the reruns)."""
from pathlib import Path

import pytest

from helpers import lua_fn

available = lua_fn("""function()
  require 'nn'
  return require('torch.backend').cpu.plan_conv_supported(torch.FloatTensor(1))
end""")
pytestmark = pytest.mark.skipif(not available(), reason="oneDNN is not installed (pip install 'luabridge[onednn]')")

run = lua_fn(r"""function(name, batch)
  require 'nn'
  local P = dofile('@MODELS@')
  local blas = require 'torch.backend.cpu.blas'
  local watch, threads = blas.watchLoad, torch.getnumthreads()
  blas.watchLoad = false
  torch.setnumthreads(1)
  local function train(planned)
    torch.manualSeed(1)
    local model, sizes, classes = P[name](true)
    model:float():training()
    local x = torch.FloatTensor(batch, unpack(sizes)):normal()
    local y = torch.LongTensor(batch):random(1, classes)
    local criterion = nn.CrossEntropyCriterion():float()
    nn.plans.enabled = planned
    local params, grads = model:getParameters()
    local lazy, inner, reruns = {}, nil, 0
    local planConv = require 'nn.util.plan_conv'
    for s = 1, 3 do
      local before = planConv.reruns
      grads:zero()
      local out = model:forward(x)
      criterion:forward(out, y)
      model:backward(x, criterion:backward(out, y))
      local n = 0
      for _, m in ipairs(model:findModules('nn.SpatialBatchNormalization')) do
        if rawget(m, 'output') == nil then n = n + 1 end
      end
      lazy[s] = n
      if s > 1 then reruns = reruns + planConv.reruns - before end
      -- after the last step an inner batch norm's output, read before the update (materialized
      -- where lazy; read after it, it would show the new weights' value)
      if s == 3 then inner = model:findModules('nn.SpatialBatchNormalization')[2].output:clone() end
      params:add(-0.01, grads)
    end
    nn.plans.enabled = true
    return lazy, inner, #model:findModules('nn.SpatialBatchNormalization'), reruns
  end
  local ok, err = pcall(function()
    local lazy, a, count, reruns = train(true)
    local _, b = train(false)
    return { lazy[2], lazy[3], (a:double() - b:double()):abs():max() / math.max(1, b:clone():abs():max()), count,
      reruns }
  end)
  blas.watchLoad = watch
  torch.setnumthreads(threads)
  if not ok then error(err, 0) end
  return err[1], err[2], err[3], err[4], err[5]
end""".replace("@MODELS@", str(Path(__file__).resolve().parent / "plan_models.lua")))


@pytest.mark.parametrize("name,batch", [("resnet", 3), ("shortcuts", 3)])
def test_planned_steps_leave_inner_modules_lazy(name: str, batch: int) -> None:
    lazy2, lazy3, diff, count, reruns = run(name, batch)
    assert reruns == 0, f"{name}: planned steps 2 and 3 reran the forward layer by layer {reruns} times"
    # the first step plans (layer by layer, then the plan); the next two run the plan
    assert lazy2 > 0 and lazy3 > 0, f"{name}: of {count} batch norms none stayed lazy: {lazy2}, {lazy3}"
    assert diff < 1e-3, f"{name}: an inner output read after planned steps differs by {diff:.3g}"
