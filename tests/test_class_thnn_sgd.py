"""torch.class's `new` (luaT_lua_newmetatable puts the constructor in the class metatable as
`new`), nn.THNN (lua/nn/THNN.lua: torch/nn's kernel table over our nn modules) and
nn.StochasticGradient (torch/threads' benchmark trains with it). Expected values are numpy's."""
from __future__ import annotations

import numpy as np
import pytest

from helpers import N, T, assert_lua_error, lua_fn
from lua_json import fresh_runner


@pytest.fixture(scope="module")
def run():
    yield from fresh_runner("")


def test_class_new_is_the_constructor(run):
    got = run("""
      local Trainer = torch.class('NewTest.Trainer')
      function Trainer:__init(a, b) self.sum = a + b end
      function Trainer:twice() return 2 * self.sum end
      local Sub = torch.class('NewTest.SubTrainer', 'NewTest.Trainer')
      local M = {}
      torch.class('NewTest.Thing', M)
      function M.Thing:__init(x) self.x = x end
      local t, s = Trainer.new(2, 3), Sub.new(4, 5)
      return {torch.type(t), t.sum, t:twice(), torch.type(s), s.sum, torch.isTypeOf(s, 'NewTest.Trainer'),
              M.Thing.new(7).x, NewTest.Trainer.new(1, 1).sum, rawget(Trainer, 'new') ~= nil}""")
    assert got == ["NewTest.Trainer", 5, 10, "NewTest.SubTrainer", 9, True, 7, 2, True]


# fn(name, typeName, args...): the kernel of that tensor type called with each tensor's cdata()
kernel = lua_fn("""function(name, typeName, ...)
  local THNN = require 'nn.THNN'
  local args = { n = select('#', ...), ... }
  for i = 1, args.n do if torch.isTensor(args[i]) then args[i] = args[i]:cdata() end end
  return torch.getmetatable(typeName).THNN[name](unpack(args, 1, args.n))
end""")


def empty(dtype=np.float64):
    return T(np.zeros(0, dtype=dtype))


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def test_helpers_and_tables():
    got = lua_fn("""function()
      local THNN = require 'nn.THNN'
      local t = torch.FloatTensor(2)
      return THNN.NULL == nil, THNN.getState() == nil, THNN.optionalTensor(nil) == nil,
             THNN.optionalTensor(t) == t:cdata(), type(THNN.kernels['torch.FloatTensor'].Sigmoid_updateOutput),
             t.THNN == THNN.kernels['torch.FloatTensor'], torch.DoubleTensor().THNN == THNN.kernels['torch.DoubleTensor']
    end""")()
    assert got == (True, True, True, True, "function", True, True)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_pointwise_kernels(rng, dtype):
    type_name = "torch.DoubleTensor" if dtype == np.float64 else "torch.FloatTensor"
    x, go = rng.standard_normal((3, 5)).astype(dtype), rng.standard_normal((3, 5)).astype(dtype)
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    out, gi = empty(dtype), empty(dtype)
    kernel("Sigmoid_updateOutput", type_name, T(x), out)
    np.testing.assert_allclose(N(out), sigmoid(x.astype(np.float64)), rtol=rtol)
    kernel("Sigmoid_updateGradInput", type_name, T(x), T(go), gi, out)
    s = sigmoid(x.astype(np.float64))
    np.testing.assert_allclose(N(gi), go * s * (1 - s), rtol=rtol * 10, atol=rtol)
    kernel("Threshold_updateOutput", type_name, T(x), out, 0.5, -1.0, False)
    np.testing.assert_array_equal(N(out), np.where(x > 0.5, x, -1.0).astype(dtype))
    kernel("Threshold_updateGradInput", type_name, T(x), T(go), gi, 0.5, -1.0, False)
    np.testing.assert_array_equal(N(gi), np.where(x > 0.5, go, 0).astype(dtype))
    kernel("LogSoftMax_updateOutput", type_name, T(x), out)
    logsm = x - np.log(np.exp(x.astype(np.float64)).sum(1, keepdims=True))
    np.testing.assert_allclose(N(out), logsm, rtol=rtol * 10, atol=rtol)


def test_inplace_threshold_writes_the_input(rng):
    x = rng.standard_normal(6)
    xt, out = T(x.copy()), empty()
    kernel("Threshold_updateOutput", "torch.DoubleTensor", xt, out, 0.0, 0.0, True)
    np.testing.assert_array_equal(N(xt), np.maximum(x, 0))
    np.testing.assert_array_equal(N(out), np.maximum(x, 0))


def test_criterion_kernels(rng):
    x, t = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    loss, gi = empty(), empty()
    kernel("MSECriterion_updateOutput", "torch.DoubleTensor", T(x), T(t), loss, True)
    assert N(loss)[0] == pytest.approx(((x - t) ** 2).mean(), rel=1e-12)
    kernel("MSECriterion_updateGradInput", "torch.DoubleTensor", T(x), T(t), gi, False)
    np.testing.assert_allclose(N(gi), 2 * (x - t), rtol=1e-12)
    logp = np.log(np.exp(x) / np.exp(x).sum(1, keepdims=True))
    target = np.array([1, 3, 2, 1])
    kernel("ClassNLLCriterion_updateOutput", "torch.DoubleTensor", T(logp), T(target.astype(np.int64)), loss,
           True, None, empty(), -100)
    assert N(loss)[0] == pytest.approx(-logp[np.arange(4), target - 1].mean(), rel=1e-12)


def conv2d(x, w, b, pad):
    """Cross-correlation of x (n, c, h, w) with w (o, c, kh, kw), stride 1, zero padding pad."""
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    kh, kw = w.shape[2:]
    windows = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(2, 3))
    return np.einsum("nchwij,ocij->nohw", windows, w) + b[None, :, None, None]


def test_convolution_and_pooling_kernels(rng):
    x = rng.standard_normal((2, 3, 6, 6))
    w, b = rng.standard_normal((4, 3, 3, 3)), rng.standard_normal(4)
    out = empty()
    kernel("SpatialConvolutionMM_updateOutput", "torch.DoubleTensor", T(x), out, T(w.reshape(4, 27).copy()), T(b),
           empty(), empty(), 3, 3, 1, 1, 1, 1)
    np.testing.assert_allclose(N(out), conv2d(x, w, b, 1), rtol=1e-10, atol=1e-10)
    pooled, indices = empty(), empty()
    kernel("SpatialMaxPooling_updateOutput", "torch.DoubleTensor", T(x), pooled, indices, 2, 2, 2, 2, 0, 0, False)
    np.testing.assert_array_equal(N(pooled), x.reshape(2, 3, 3, 2, 3, 2).max(axis=(3, 5)))
    avg = empty()
    kernel("SpatialAveragePooling_updateOutput", "torch.DoubleTensor", T(x), avg, 3, 3, 3, 3, 0, 0, False, True)
    np.testing.assert_allclose(N(avg), x.reshape(2, 3, 2, 3, 2, 3).mean(axis=(3, 5)), rtol=1e-12)


def test_unknown_kernels_and_types_are_named():
    for code, message in [
        ("require('nn.THNN').runKernel('Nope_updateOutput', 'torch.DoubleTensor')",
         "Function 'Nope_updateOutput' not found for tensor type 'torch.DoubleTensor'"),
        ("require('nn.THNN').runKernel('Abs_updateOutput', 'torch.IntTensor')", "Unsupported tensor type: torch.IntTensor"),
        ("local _ = require('nn.THNN').C.THNN_FloatNope", "nn.THNN: no kernel THNN_FloatNope in luabridge"),
    ]:
        assert_lua_error(code, message)


def test_stochastic_gradient_steps_each_example_in_order(rng):
    """Two passes of per-example SGD on MSE, in order, learning rate decaying as torch7's:
    rate / (1 + iteration * decay) from the second pass."""
    x, y = rng.standard_normal((5, 3)), rng.standard_normal((5, 2))
    w, b = rng.standard_normal((2, 3)), rng.standard_normal(2)
    got = lua_fn("""function(x, y, w, b)
      require 'nn'
      local model = nn.Linear(3, 2)
      model.weight:copy(w); model.bias:copy(b)
      local data = {}
      function data:size() return x:size(1) end
      setmetatable(data, {__index = function(_, i) return {x[i], y[i]} end})
      local sgd = nn.StochasticGradient(model, nn.MSECriterion())
      sgd.learningRate, sgd.learningRateDecay, sgd.maxIteration = 0.1, 0.5, 2
      sgd.shuffleIndices, sgd.verbose = false, false
      local errors = {}
      sgd.hookIteration = function(_, it, err) errors[it] = err end
      sgd:train(data)
      return model.weight, model.bias, errors
    end""")(T(x), T(y), T(w), T(b))
    rate, errors = 0.1, []
    for iteration in (1, 2):
        total = 0.0
        for xi, yi in zip(x, y):
            out = w @ xi + b
            total += ((out - yi) ** 2).mean()
            grad = 2 * (out - yi) / 2
            w, b = w - rate * np.outer(grad, xi), b - rate * grad
        errors.append(total / 5)
        rate = 0.1 / (1 + (iteration + 1) * 0.5)
    np.testing.assert_allclose(N(got[0]), w, rtol=1e-12)
    np.testing.assert_allclose(N(got[1]), b, rtol=1e-12)
    assert [got[2][1], got[2][2]] == pytest.approx(errors, rel=1e-12)
