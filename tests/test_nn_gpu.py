"""nn.GPU, torch/nn's device decorator (neural-style's -multigpu_strategy and rnn build with it):
on one device it is the module it wraps, gradients included, and its files keep torch/nn's layout
(a {type, device} header, then the fields)."""
from __future__ import annotations

import numpy as np
import pytest

import luabridge


def test_forward_backward_are_the_wrapped_modules(lua, rng):
    lua.execute("require 'nn'")
    x, g = rng.standard_normal((4, 3)), rng.standard_normal((4, 2))
    run = lua.eval("""function(x, g)
      torch.manualSeed(5)
      local plain = nn.Linear(3, 2)
      local wrapped = nn.GPU(plain:clone(), 1)
      local outs = {}
      for i, m in ipairs({plain, wrapped}) do
        m:zeroGradParameters()
        local y = m:forward(x):clone()
        local gi = m:backward(x, g):clone()
        local _, gp = m:getParameters()
        outs[i] = {y, gi, gp:clone()}
      end
      return outs
    end""")
    outs = run(luabridge.from_numpy(x), luabridge.from_numpy(g))
    for k in (1, 2, 3):
        np.testing.assert_array_equal(luabridge.to_numpy(outs[1][k]), luabridge.to_numpy(outs[2][k]))


def test_file_layout_is_torch_nns(lua):
    # read it back through torch.deserialize: the device kept, the module alive
    back = lua.eval("torch.deserialize(torch.serialize(nn.GPU(nn.Tanh(), 3)))")
    assert lua.eval("torch.type")(back) == "nn.GPU" and back.device == 3
    assert lua.eval("torch.type")(back.modules[1]) == "nn.Tanh"
    # what write hands the file: the {type, device} header, then a table of the fields
    written = lua.eval("""(function()
      local seen = {}
      local file = { writeObject = function(_, x) seen[#seen + 1] = x end }
      nn.GPU(nn.Tanh(), 3):write(file)
      return seen
    end)()""")
    assert written[1][1] == "torch.DoubleTensor" and written[1][2] == 3
    assert written[2]["device"] == 3 and lua.eval("torch.type")(written[2]["modules"][1]) == "nn.Tanh"
    # a file from a machine with more devices loads onto device 1 of a CUDA module
    assert lua.eval("""(function()
      local fields = {}
      local queue = { {'torch.CudaTensor', 4}, {device = 4, outdevice = 4, modules = {nn.Tanh()}} }
      local g = nn.GPU(nn.Tanh(), 1)
      g:read({ readObject = function() return table.remove(queue, 1) end })
      return g.device
    end)()""") == 1


@pytest.mark.parametrize("code, message", [("nn.GPU(nn.Tanh(), 'x')", "device must be a number"),
                                           ("nn.GPU({}, 1)", "module must be an nn.Module")])
def test_bad_arguments(lua, code, message):
    with pytest.raises(luabridge.LuaError, match=message):
        lua.eval(code)
