"""nn layers on CUDA tensors (module:cuda()), with numpy standing in for CuPy so that it runs on any
machine: the results must match the same module on CPU tensors (compared in float64 against the
float32 device run)."""
from __future__ import annotations

import numpy as np
import pytest

import luabridge
from luabridge import cuda
from nn_layers_check import call, forward, lua_tensor, module


@pytest.fixture
def numpy_device(lua):
    cuda.use_array_module(np)
    yield
    cuda.use_array_module(None)


_RUN = """function(m, x, g, onDevice)
  if onDevice then m = m:clone():cuda(); x = x:cuda(); g = g:cuda() end
  local y = m:forward(x):double()
  local gi = m:backward(x, g):double()
  return y, gi, torch.type(m.output)
end"""

DEVICE_MODULES = ["nn.Linear(4, 3)", "nn.ReLU()", "nn.ReLU(true)", "nn.Threshold(0.2, -1)", "nn.HardTanh()",
                  "nn.ReLU6()", "nn.Tanh()", "nn.Sigmoid()", "nn.SoftMax()", "nn.LogSoftMax()", "nn.SoftMin()",
                  "nn.Max(2)", "nn.Min(1)", "nn.Sum(2)", "nn.Normalize(2)", "nn.Normalize(math.huge)",
                  "nn.CMul(4)", "nn.CAdd(4)", "nn.Add(4)", "nn.Mul()", "nn.Euclidean(4, 2)", "nn.Cosine(4, 2)",
                  "nn.View(-1)", "nn.Reshape(2, 6)", "nn.Narrow(2, 2, 2)", "nn.Padding(2, -1)",
                  "nn.BatchNormalization(4)", "nn.MulConstant(3)"]


@pytest.mark.parametrize("ctor", DEVICE_MODULES)
def test_device_matches_cpu(ctor, numpy_device, rng):
    m = module(ctor)
    x = rng.standard_normal((3, 4))
    g = rng.standard_normal(forward(m, x.copy()).shape)
    y, gi, _ = call(_RUN, m, lua_tensor(x.copy()), lua_tensor(g), False)
    yd, gid, kind = call(_RUN, m, lua_tensor(x.copy()), lua_tensor(g), True)
    assert kind == "torch.CudaTensor"
    np.testing.assert_allclose(luabridge.to_numpy(yd), luabridge.to_numpy(y), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(luabridge.to_numpy(gid), luabridge.to_numpy(gi), rtol=1e-5, atol=1e-5)


def test_cpu_only_modules_say_so(numpy_device):
    with pytest.raises(luabridge.LuaError, match=r"nn.LeakyReLU: torch.CudaTensor is not supported \(CPU kernel\)"):
        call("function() return nn.LeakyReLU():cuda():forward(torch.randn(3):cuda()) end")
