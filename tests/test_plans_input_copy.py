"""Why a planned forward copies its input (docs/plans-conv.md, "What a program sees"): a skipped
inner output read after the program wrote into its input shows the values the forward computed
from the old input, as torch7's did (the rerun starts from the copy)."""
from __future__ import annotations

import pytest

from helpers import lua_fn

available = lua_fn("""function()
  require 'nn'
  return require('torch.backend').cpu.plan_conv_supported(torch.FloatTensor(1))
end""")
pytestmark = pytest.mark.skipif(not available(), reason="oneDNN is not installed (pip install 'luabridge[onednn]')")

_RUN = lua_fn(r"""function(change)
  require 'nn'
  torch.manualSeed(5)
  local model = nn.Sequential()
    :add(nn.SpatialConvolution(3, 8, 3, 3, 1, 1, 1, 1))
    :add(nn.SpatialBatchNormalization(8)):add(nn.ReLU(true))
    :add(nn.SpatialConvolution(8, 8, 3, 3, 1, 1, 1, 1))
    :add(nn.SpatialBatchNormalization(8))
    :float()
  for _, bn in ipairs(model:findModules('nn.SpatialBatchNormalization')) do
    bn.running_mean:uniform(-0.2, 0.2); bn.running_var:uniform(0.5, 2)
  end
  model:evaluate()
  local x = torch.FloatTensor(2, 3, 12, 12):normal()
  local old = x:clone()
  -- the reference: layer by layer on the input as it was
  nn.plans.enabled = false
  local ref = model:clone()
  ref:forward(old)
  nn.plans.enabled = true
  for _ = 1, 3 do model:forward(x) end   -- planned from the second forward on
  loadstring('local x = ...; ' .. change)(x)        -- the program writes into its input
  local d1 = (model.modules[1].output - ref.modules[1].output):abs():max()   -- a skipped output
  local d2 = (model.modules[4].output - ref.modules[4].output):abs():max()
  return d1, d2, model.modules[1].output:nElement()
end""")


@pytest.mark.parametrize("change", ["x:fill(7)", "x:mul(-3):add(1)", "x:resize(1, 3, 12, 12):zero()"])
def test_inner_outputs_read_after_the_input_changed_show_the_forwards_values(change: str) -> None:
    d1, d2, n = _RUN(change)
    assert n == 2 * 8 * 12 * 12
    assert d1 < 1e-5 and d2 < 1e-5, (d1, d2)
