"""Training plans add each convolution's weight gradient into the module's gradWeight in the reorder
out of oneDNN's blocked layout (a reorder with a source scale and a sum post-op: gradWeight =
scale * gradient + gradWeight), instead of a reorder into a buffer of the plan's and an axpy
(lua/torch/backend/cpu/nn_plan.lua, trainOptions.fusedAccumulate). The gradients here accumulate
over several steps without zeroing, with backward's scale 1 and 0.5, so that the sum keeps what
gradWeight held; each run is compared with the same model run layer by layer (nn.plans.enabled =
false), with the switch on and off, at one thread."""
from pathlib import Path

import pytest

from helpers import lua_fn

available = lua_fn("""function()
  require 'nn'
  return require('torch.backend').cpu.plan_conv_supported(torch.FloatTensor(1))
end""")
pytestmark = pytest.mark.skipif(not available(), reason="oneDNN is not installed (pip install 'luabridge[onednn]')")

run = lua_fn(r"""function(name, batch, scale, fused)
  require 'nn'
  local P = dofile('@MODELS@')
  local options = require('torch.backend.cpu.nn_plan').trainOptions
  local blas = require 'torch.backend.cpu.blas'
  local watch, threads, was = blas.watchLoad, torch.getnumthreads(), options.fusedAccumulate
  blas.watchLoad = false
  torch.setnumthreads(1)
  options.fusedAccumulate = fused
  local function train(planned)
    torch.manualSeed(1)
    local model, sizes, classes = P[name](true)
    model:float():training()
    local x = torch.FloatTensor(batch, unpack(sizes)):normal()
    local y = torch.LongTensor(batch):random(1, classes)
    local criterion = nn.CrossEntropyCriterion():float()
    nn.plans.enabled = planned
    local params, grads = model:getParameters()
    grads:normal()   -- what the sums add to: the gradients are never zeroed
    local r, names = {}, {}
    for s = 1, 4 do
      local out = model:forward(x)
      criterion:forward(out, y)
      model:backward(x, criterion:backward(out, y), scale)
      r[#r + 1] = grads:clone()
      for _, list in ipairs(require('nn.util.plan_train').steps(model)) do
        for _, n in ipairs(list) do names[#names + 1] = n end
      end
      params:add(-0.01, grads)
    end
    nn.plans.enabled = true
    return r, names, require('nn.util.plan_conv').planned(model)
  end
  local ok, err = pcall(function()
    local a, names, planned = train(true)
    local b = train(false)
    local worst = 0
    for i = 1, #a do
      worst = math.max(worst, (a[i]:double() - b[i]:double()):abs():max() / math.max(1, b[i]:clone():abs():max()))
    end
    local fusedSteps = 0
    for _, n in ipairs(names) do if n:find('^reorder%+=') then fusedSteps = fusedSteps + 1 end end
    return { worst, fusedSteps, planned }
  end)
  options.fusedAccumulate = was
  blas.watchLoad = watch
  torch.setnumthreads(threads)
  if not ok then error(err, 0) end
  return err[1], err[2], err[3]
end""".replace("@MODELS@", str(Path(__file__).resolve().parent / "plan_models.lua")))


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("name,batch,scale", [("resnet", 4, 1.0), ("resnet", 3, 0.5), ("shortcuts", 3, 0.5)])
def test_weight_gradients_accumulate_as_layer_by_layer(name: str, batch: int, scale: float, fused: bool) -> None:
    worst, fused_steps, planned = run(name, batch, scale, fused)
    assert planned, "the steps after the first run the plan"
    if fused:
        assert fused_steps > 0, "the plan adds the weight gradients in its reorders"
    else:
        assert fused_steps == 0, "with the switch off the plan reorders into a buffer and adds after"
    # float32 sums in another order over 4 steps of gradients of magnitude ~1 (the normal start)
    assert worst < 1e-4, f"{name}: planned gradients differ from layer by layer by {worst:.3g}"
