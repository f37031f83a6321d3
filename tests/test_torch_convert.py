"""luabridge.torch.convert: every layer converter (convert_layers) gives a native PyTorch module
whose output, on random double inputs, equals the Lua module's to 1e-10, and whose input
gradient through PyTorch's autograd equals the Lua module's updateGradInput; the module types
and weights are PyTorch's own; strict mode names the class and path it cannot convert, and
strict=False keeps it as a LuaModule inside a model that still matches."""
from __future__ import annotations

import io
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable
from unittest import mock

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is missing (pip install torch): luabridge.torch needs it")

import luabridge  # noqa: E402
from helpers import lua_fn  # noqa: E402
from luabridge.core.proxy import wrap  # noqa: E402
from luabridge.torch import LuaModule  # noqa: E402
from luabridge.torch import convert_layers, layers  # noqa: E402
from luabridge.torch.convert import CONVERTERS, ConversionError, convert  # noqa: E402

TOL = dict(rtol=1e-10, atol=1e-10)


@pytest.fixture(autouse=True, scope="module")
def _nn():
    luabridge.require("nn")

# build(ctor, input): the module and its input, from Lua expressions; in the input R(...) is
# torch.randn, P(...) values in [0.5, 1.5), L{...} a LongTensor; E(m) puts m in evaluation with
# random running statistics (batch normalization).
_BUILD = lua_fn(r"""function(ctor, inputExpr)
  require 'nn'
  local function E(m)
    if m.running_mean then
      m.running_mean:normal()
      m.running_var:uniform(0.5, 2)
    end
    m:evaluate()
    return m
  end
  local env = setmetatable({ R = torch.randn, L = torch.LongTensor, E = E,
    P = function(...) return torch.rand(...):add(0.5) end }, { __index = _G })
  local function eval(expr) return setfenv(assert(loadstring('return ' .. expr)), env)() end
  torch.manualSeed(5)
  return eval(ctor), eval(inputExpr)
end""")

# (constructor, input[, checks the input gradient])
CASES: list[tuple] = [
    # linear, convolutions
    ("nn.Linear(3, 4)", "R(2, 3)"),
    ("nn.Linear(3, 4)", "R(3)"),
    ("nn.Linear(3, 4, false)", "R(2, 3)"),
    ("nn.Linear(3, 4):noBias()", "R(3)"),
    ("nn.LinearWeightNorm(3, 4)", "R(2, 3)"), ("nn.LinearWeightNorm(3, 4, false)", "R(3)"),
    ("nn.Bilinear(3, 4, 2)", "{R(5, 3), R(5, 4)}"),
    ("nn.Bilinear(3, 4, 2, false)", "{R(5, 3), R(5, 4)}"),
    ("nn.SpatialConvolution(2, 3, 3, 3, 2, 1, 1, 1)", "R(2, 2, 7, 6)"),
    ("nn.SpatialConvolution(2, 3, 3, 2):noBias()", "R(2, 5, 6)"),
    ("nn.SpatialConvolutionMM(2, 3, 3, 2, 1, 2, 1, 0)", "R(2, 2, 6, 6)"),
    ("nn.SpatialDilatedConvolution(2, 3, 3, 3, 1, 2, 2, 1, 2, 3)", "R(2, 2, 9, 10)"),
    ("nn.SpatialFullConvolution(2, 3, 3, 3, 2, 2, 1, 1, 1, 0)", "R(2, 2, 4, 5)"),
    ("nn.SpatialFullConvolution(2, 3, 2, 3):noBias()", "R(2, 4, 5)"),
    ("nn.SpatialFullConvolution(2, 3, 3, 3, 2, 2, 1, 1)", "{R(2, 2, 4, 5), R(2, 1, 8, 10)}", False),
    ("nn.SpatialDilatedConvolution(2, 3, 2, 2, 1, 1, 0, 0, 2, 2)", "R(2, 6, 6)"),
    ("nn.VolumetricConvolution(2, 3, 3, 3, 2, 1, 2, 1, 1, 0, 1)", "R(2, 2, 5, 6, 5)"),
    ("nn.VolumetricConvolution(2, 3, 2, 2, 2)", "R(2, 3, 4, 4)"),
    ("nn.VolumetricFullConvolution(2, 3, 2, 2, 2, 2, 2, 2)", "{R(2, 2, 3, 3), R(1, 7, 6, 7)}", False),
    ("nn.VolumetricFullConvolution(2, 3, 3, 2, 3, 2, 2, 2, 1, 0, 1, 1, 1, 0)", "R(2, 2, 3, 4, 3)"),
    ("nn.VolumetricDilatedConvolution(2, 3, 2, 3, 3, 1, 1, 2, 0, 1, 1, 2, 2, 1)", "R(2, 2, 5, 6, 7)"),
    ("nn.TemporalConvolution(3, 4, 3, 2)", "R(8, 3)"),
    ("nn.TemporalConvolution(3, 4, 2)", "R(2, 7, 3)"),
    ("nn.SpatialDepthWiseConvolution(3, 2, 3, 2, 1, 2, 1, 0)", "R(2, 3, 6, 5)"),
    ("nn.SpatialDepthWiseConvolution(2, 3, 2, 2):noBias()", "R(2, 4, 4)"),
    # pooling
    ("nn.TemporalMaxPooling(3, 2)", "R(9, 4)"), ("nn.TemporalMaxPooling(2)", "R(2, 8, 3)"),
    ("nn.SpatialMaxPooling(3, 3, 2, 2, 1, 1):ceil()", "R(2, 2, 8, 8)"),
    ("nn.SpatialMaxPooling(2, 2)", "R(2, 6, 7)"),
    ("nn.SpatialDilatedMaxPooling(3, 2, 1, 2, 1, 1, 2, 1)", "R(2, 2, 7, 8)"),
    ("nn.SpatialAveragePooling(3, 3, 2, 2, 1, 1):ceil()", "R(1, 2, 8, 7)"),
    ("nn.SpatialAveragePooling(3, 2, 2, 2, 1, 1):ceil():setCountExcludePad()", "R(2, 8, 7)"),
    ("nn.SpatialAveragePooling(2, 2)", "R(2, 2, 5, 5)"),
    ("nn.VolumetricMaxPooling(2, 2, 2, 2, 2, 2, 1, 1, 1):ceil()", "R(2, 2, 5, 4, 5)"),
    ("nn.VolumetricDilatedMaxPooling(2, 2, 2, 1, 1, 1, 0, 1, 0, 2, 1, 2)", "R(2, 5, 4, 5)"),
    ("nn.VolumetricAveragePooling(2, 2, 2, 1, 2, 2)", "R(2, 2, 4, 5, 6)"),
    ("nn.SpatialLPPooling(2, 2, 2, 2)", "P(2, 2, 6, 6)"), ("nn.SpatialLPPooling(2, 3, 3, 2, 1, 2)", "P(2, 7, 6)"),
    ("nn.SpatialAdaptiveMaxPooling(3, 2)", "R(2, 2, 7, 8)"),
    ("nn.SpatialAdaptiveAveragePooling(4, 3)", "R(2, 7, 9)"),
    # normalization, dropout
    ("nn.BatchNormalization(3)", "R(6, 3)"),
    ("nn.BatchNormalization(3, 1e-3, 0.3, false)", "R(6, 3)"),
    ("E(nn.BatchNormalization(3))", "R(3)"),
    ("nn.SpatialBatchNormalization(3)", "R(2, 3, 4, 5)"),
    ("E(nn.SpatialBatchNormalization(3, 1e-4, 0.2, false))", "R(3, 4, 5)"),
    ("nn.VolumetricBatchNormalization(2)", "R(2, 2, 3, 4, 3)"),
    ("E(nn.VolumetricBatchNormalization(2))", "R(2, 2, 3, 4, 3)"),
    ("E(nn.Dropout(0.3))", "R(4, 5)"),
    ("E(nn.Dropout(0.3, true))", "R(4, 5)"),
    ("E(nn.SpatialDropout(0.3))", "R(2, 3, 4, 4)", False),   # torch7: no backward in evaluation
    ("E(nn.VolumetricDropout(0.4))", "R(2, 3, 2, 4, 4)", False),
    ("nn.Normalize(2)", "R(3, 5)"),
    ("nn.Normalize(1.5)", "R(5)"),
    ("nn.Normalize(1.5, 1e-6)", "R(5)", False),   # torch7's gradient for p < 2 reads |x| + eps
    ("nn.Normalize(math.huge)", "R(3, 5)"),
    ("nn.SpatialCrossMapLRN(3, 0.01, 0.75, 2)", "R(2, 5, 4, 4)"),
    # activations, elementwise layers
    ("nn.Tanh()", "R(2, 3)"), ("nn.Sigmoid()", "R(2, 3)"),
    ("nn.ReLU()", "R(2, 3)"), ("nn.ReLU(true)", "R(2, 3)"),
    ("nn.Threshold(0.1, -0.5)", "R(2, 3)"),
    ("nn.HardTanh(-0.5, 0.7)", "R(2, 3)"), ("nn.Clamp(-0.3, 0.2)", "R(2, 3)"),
    ("nn.ReLU6()", "R(2, 3):mul(5)"),
    ("nn.LeakyReLU(0.2)", "R(2, 3)"), ("nn.ELU(0.7)", "R(2, 3)"),
    ("E(nn.RReLU(0.1, 0.3))", "R(2, 3)"),
    ("nn.CReLU(1)", "R(2, 3)"), ("nn.CReLU(3)", "R(3, 2, 2)"),
    ("nn.GradientReversal(0.7)", "R(2, 3)"), ("nn.ZeroGrad()", "R(2, 3)"),
    ("nn.GatedLinearUnit()", "R(2, 6)"), ("nn.GatedLinearUnit(1)", "R(4, 3)"),
    ("nn.PReLU()", "R(2, 3)"), ("nn.PReLU(3)", "R(2, 3, 4)"), ("nn.PReLU(3)", "R(3)"),
    ("nn.SoftPlus()", "R(2, 3)"), ("nn.SoftPlus(2, 1)", "R(2, 3)", False),   # torch7's gradient: linear where beta * output > threshold
    ("nn.SoftSign()", "R(2, 3)"), ("nn.LogSigmoid()", "R(2, 3)"), ("nn.TanhShrink()", "R(2, 3)"),
    ("nn.SoftShrink(0.3)", "R(2, 3)"), ("nn.HardShrink(0.3)", "R(2, 3)"),
    ("nn.Exp()", "R(2, 3)"), ("nn.Log()", "P(2, 3)"), ("nn.Abs()", "R(2, 3)"),
    ("nn.Square()", "R(2, 3)"), ("nn.Sqrt()", "P(2, 3)"), ("nn.Sqrt(0.5)", "P(2, 3)"),
    ("nn.Power(2.5)", "P(2, 3)"),
    ("nn.MulConstant(-1.5)", "R(2, 3)"), ("nn.AddConstant(0.25)", "R(2, 3)"),
    ("nn.SoftMax()", "R(5)"), ("nn.SoftMax()", "R(2, 5)"), ("nn.SoftMax()", "R(3, 4, 5)"),
    ("nn.LogSoftMax()", "R(2, 5)"), ("nn.LogSoftMax()", "R(2, 3, 4, 5)"),
    ("nn.SoftMin()", "R(2, 5)"),
    ("nn.SpatialSoftMax()", "R(2, 3, 4, 4)"), ("nn.SpatialLogSoftMax()", "R(3, 4, 4)"),
    ("nn.Mul()", "R(2, 3)"), ("nn.CMul(3)", "R(2, 3)"), ("nn.CMul(1, 3)", "R(4, 3)"),
    ("nn.CMul(3, 4)", "R(2, 3, 4)"),
    ("nn.Add(3)", "R(2, 3)"), ("nn.Add(3)", "R(3)"), ("nn.Add(3, true)", "R(2, 3)"),
    ("nn.CAdd(1, 3)", "R(4, 3)"),
    # lookup, resampling, padding
    ("nn.LookupTable(10, 3)", "L{{1, 2, 10}, {4, 4, 7}}", False),
    ("nn.LookupTable(10, 3, 2)", "L{2, 5, 2}", False),
    ("nn.LookupTable(6, 3, 0, 1.1)", "L{1, 3, 3, 6}", False),
    ("nn.SpatialUpSamplingNearest(2)", "R(2, 2, 3, 4)"),
    ("nn.SpatialUpSamplingNearest(3)", "R(2, 3, 4)"),
    ("nn.SpatialUpSamplingBilinear(2)", "R(2, 2, 3, 4)"),
    ("nn.SpatialUpSamplingBilinear({oheight = 5, owidth = 7})", "R(2, 3, 4)"),
    ("nn.UpSampling(2)", "R(2, 2, 3, 4)"), ("nn.UpSampling(2, 'linear')", "R(1, 2, 3, 2, 4)"),
    ("nn.UpSampling({oheight = 5, owidth = 3}, 'bilinear')", "R(2, 2, 3, 4)"),
    ("nn.PixelShuffle(2)", "R(2, 8, 3, 3)"), ("nn.PixelShuffle(2)", "R(8, 3, 3)"),
    ("nn.SpatialZeroPadding(1, -1, 2, 0)", "R(2, 2, 4, 5)"),
    ("nn.SpatialReflectionPadding(1, 2, 1, 0)", "R(2, 4, 5)"),
    ("nn.SpatialReplicationPadding(2, 1, 0, 1)", "R(2, 2, 4, 5)"),
    ("nn.VolumetricReplicationPadding(1, 0, 1, 2, 0, 1)", "R(2, 2, 3, 3, 3)"),
    ("nn.Padding(2, 2)", "R(2, 3)"),
    ("nn.Padding(1, -2, 1, 0.5, 2)", "R(2, 3)"),
    ("nn.Padding(1, 1, 2, -1, 2)", "R(3, 4)"),
    # shape layers
    ("nn.View(6)", "R(2, 3)"), ("nn.View(-1, 3)", "R(4, 3, 2)"),
    ("nn.View(-1, 3):setNumInputDims(2)", "R(5, 2, 3)"), ("nn.View(3, 2):setNumInputDims(2)", "R(4, 2, 3)"),
    ("nn.View(6)", "R(5, 2, 3)"),
    ("nn.Reshape(3, 2)", "R(6)"), ("nn.Reshape(3, 2)", "R(4, 6)"), ("nn.Reshape(3, 2, true)", "R(1, 6)"),
    ("nn.Reshape(6, false)", "R(3, 2)"),
    ("nn.Transpose({1, 2}, {2, 3})", "R(2, 3, 4)"), ("nn.Transpose({1, 2}):setNumInputDims(2)", "R(5, 2, 3)"),
    ("nn.Squeeze()", "R(2, 1, 3, 1)"), ("nn.Squeeze(2)", "R(2, 1, 3)"), ("nn.Squeeze(1, 2)", "R(4, 1, 3)"),
    ("nn.Squeeze(nil, 2)", "R(1, 1, 3)"),
    ("nn.Unsqueeze(2)", "R(3, 4)"), ("nn.Unsqueeze(1, 2)", "R(5, 3, 4)"),
    ("nn.Replicate(3)", "R(4)"), ("nn.Replicate(3, 2, 1)", "R(5, 4)"),
    ("nn.Narrow(2, 2, 3)", "R(3, 6)"), ("nn.Narrow(2, 2, -2)", "R(3, 6)"), ("nn.Narrow(-1, 1, 3)", "R(3, 6)"),
    ("nn.Select(2, 3)", "R(3, 4)"), ("nn.Select(-1, -1)", "R(3, 4)"),
    ("nn.Sum(2)", "R(3, 4)"), ("nn.Sum(1, 1)", "R(3, 4)"), ("nn.Sum(-1, nil, true)", "R(3, 4)"),
    ("nn.Sum(2, nil, false, false)", "R(3, 4)"), ("nn.Sum(1)", "R(4)"),
    ("nn.Mean(2)", "R(3, 4, 2)"),
    ("nn.Max(2)", "R(3, 4)"), ("nn.Max(1, 1)", "R(3, 4)"), ("nn.Min(1)", "R(5)"), ("nn.Min(-1)", "R(2, 5)"),
    ("nn.Collapse(2)", "R(4, 2, 3)"), ("nn.Collapse(2)", "R(2, 3)"),
    ("nn.Identity()", "R(2, 3)"), ("nn.Contiguous()", "R(2, 3)"),
    ("nn.Copy('torch.DoubleTensor', 'torch.FloatTensor')", "R(2, 3)"),
    # containers
    ("nn.Sequential():add(nn.Linear(3, 4)):add(nn.Tanh()):add(nn.Sequential():add(nn.Linear(4, 2)))", "R(2, 3)"),
    ("nn.Concat(2):add(nn.Linear(3, 2)):add(nn.Linear(3, 4))", "R(2, 3)"),
    ("nn.DepthConcat(2):add(nn.SpatialConvolution(2, 3, 3, 3)):add(nn.SpatialConvolution(2, 2, 1, 1))"
     ":add(nn.SpatialConvolution(2, 1, 2, 2))", "R(2, 2, 5, 5)"),
    ("nn.Decorator(nn.Linear(3, 2))", "R(4, 3)"), ("nn.NaN(nn.Tanh())", "R(4, 3)"),
    ("nn.Profile(nn.Linear(3, 2), 1000)", "R(4, 3)"), ("nn.Maxout(4, 3, 2)", "R(5, 4)"),
    ("nn.Parallel(2, 2):add(nn.Linear(3, 2)):add(nn.Linear(3, 4))", "R(3, 2, 3)"),
]

# cudnn's and cunn's classes (without a GPU: LUABRIDGE_CUDA_ON_CPU=1), in a runtime of their own.
CUDNN_CASES: list[tuple] = [
    ("cudnn.SpatialConvolution(4, 6, 3, 3, 1, 1, 1, 1, 2)", "R(2, 4, 5, 5)"),
    ("cudnn.SpatialFullConvolution(2, 3, 3, 3, 2, 2, 1, 1)", "R(2, 2, 4, 4)"),
    ("cudnn.VolumetricConvolution(2, 3, 2, 2, 2)", "R(2, 2, 3, 4, 4)"),
    ("cudnn.VolumetricFullConvolution(2, 3, 2, 2, 2, 2, 2, 2)", "R(2, 2, 2, 3, 3)"),
    ("cudnn.TemporalConvolution(3, 4, 3, 1, 1)", "R(2, 6, 3)"),
    ("cudnn.SpatialMaxPooling(2, 2, 2, 2, 1, 1)", "R(2, 2, 5, 5)"),
    ("cudnn.VolumetricMaxPooling(2, 2, 2)", "R(2, 2, 4, 4, 4)"),
    ("cudnn.SpatialAveragePooling(2, 2)", "R(2, 2, 6, 6)"),
    ("cudnn.VolumetricAveragePooling(2, 2, 2, 2, 2, 2, 1, 1, 1)", "R(2, 2, 4, 4, 4)"),
    ("cudnn.BatchNormalization(3)", "R(4, 3)"),
    ("cudnn.SpatialBatchNormalization(3)", "R(2, 3, 4, 4)"),
    ("cudnn.VolumetricBatchNormalization(2)", "R(2, 2, 2, 3, 3)"),
    ("cudnn.SpatialCrossMapLRN(3)", "R(2, 4, 3, 3)"),
    ("cudnn.ReLU(true)", "R(2, 3)"), ("cudnn.Tanh()", "R(2, 3)"), ("cudnn.Sigmoid()", "R(2, 3)"),
    ("cudnn.ClippedReLU(0.5)", "R(2, 3)"),
    ("cudnn.SoftMax()", "R(2, 3, 4, 4)"), ("cudnn.LogSoftMax()", "R(3, 4, 4)"),
    ("cudnn.SpatialSoftMax()", "R(2, 3, 4, 4)"), ("cudnn.SpatialLogSoftMax()", "R(2, 3, 4, 4)"),
    ("cudnn.LSTM(3, 4, 2):double()", "R(5, 2, 3)"), ("cudnn.BLSTM(3, 4, 2):double()", "R(4, 2, 3)"),
    ("cudnn.GRU(3, 4, 1, true):double()", "R(2, 5, 3)"), ("cudnn.BGRU(3, 2, 2, true):double()", "R(2, 4, 3)"),
    ("cudnn.RNNTanh(3, 4, 2):double()", "R(5, 2, 3)"), ("cudnn.RNNReLU(3, 4, 1):double()", "R(5, 2, 3)"),
    ("cudnn.RNN(2, 3, 1):double()", "R(4, 3, 2)"),
    ("nn.DataParallelTable(1):add(nn.Sequential():add(nn.Linear(3, 2)), {1})", "R(4, 3)"),
    ("cudnn.VolumetricSoftMax()", "R(2, 3, 2, 3, 3)"), ("cudnn.VolumetricLogSoftMax()", "R(3, 2, 3, 3)"),
]


def _torch(x: Any) -> Any:
    """A torch copy of a Lua tensor (proxy or raw), or a list of them for a table."""
    if isinstance(x, list):
        return [_torch(v) for v in x]
    return torch.from_numpy(luabridge.to_numpy(x).copy())


def _lua(x: Any) -> Any:
    return [_lua(v) for v in x] if isinstance(x, list) else luabridge.from_numpy(x.detach().numpy())


def _leaves(x: Any) -> list:
    return [v for e in x for v in _leaves(e)] if isinstance(x, list) else [x]


def _compare(ctor: str, inp: str, grad: bool = True) -> None:
    """Converts ctor's module, runs both on the input (and back from a random gradOutput), and
    compares the outputs and input gradients."""
    module, x = (wrap(v) for v in _BUILD(ctor, inp))
    converted = convert(module)
    xt = _torch(x)
    for leaf in _leaves(xt):
        leaf.requires_grad_(grad)
    y = converted([leaf.clone() for leaf in xt] if isinstance(xt, list) else xt.clone())
    y_lua = _torch(module.forward(x))
    torch.testing.assert_close(y, y_lua, **TOL)
    for name, buffer in converted.named_buffers():   # batch normalization's running statistics
        if name.endswith(("running_mean", "running_var")):
            torch.testing.assert_close(buffer, _torch(getattr(module, name.split(".")[-1])), **TOL)
    if grad:
        go = torch.randn(y.shape, dtype=y.dtype)
        y.backward(go)
        gi_lua = _torch(module.backward(x, luabridge.from_numpy(go.numpy())))
        torch.testing.assert_close([leaf.grad for leaf in _leaves(xt)], _leaves(gi_lua), **TOL)


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]} {c[1]}" for c in CASES])
def test_converted_layer_matches_lua(case):
    _compare(*case)


@pytest.fixture(scope="module")
def cudnn_thread():
    """A thread whose runtime has cudnn loaded without a GPU (the other tests' runtime stays without)."""
    pool = ThreadPoolExecutor(max_workers=1)
    with mock.patch.dict(os.environ, {"LUABRIDGE_CUDA_ON_CPU": "1"}):
        for package in ("cudnn", "cunn"):
            pool.submit(luabridge.require, package).result()

    def run(fn: Callable[..., Any], *args: Any) -> Any:
        return pool.submit(fn, *args).result()
    yield run
    pool.shutdown()


@pytest.mark.parametrize("case", CUDNN_CASES, ids=[f"{c[0]} {c[1]}" for c in CUDNN_CASES])
def test_converted_cudnn_layer_matches_lua(cudnn_thread, case):
    cudnn_thread(_compare, *case)


def test_every_layer_converter_has_a_case():
    built = " ".join(c[0] for c in CASES + CUDNN_CASES)
    ours = [name for name, fn in CONVERTERS.items() if fn.__module__ == convert_layers.__name__]
    assert [name for name in ours if f"{name}(" not in built] == []


# ---- the tree: PyTorch's own modules, weights copied, names, dtypes

def test_converted_tree_holds_pytorch_modules_and_the_lua_weights():
    lua = luabridge.eval("""nn.Sequential():add(nn.SpatialConvolutionMM(2, 3, 3, 3)):add(nn.SpatialBatchNormalization(3))
      :add(nn.ReLU()):add(nn.View(-1):setNumInputDims(3)):add(nn.Linear(12, 2))""")
    m = convert(wrap(lua))
    assert isinstance(m, torch.nn.Sequential)
    assert [type(c) for c in m] == [torch.nn.Conv2d, layers.BatchNorm2d, torch.nn.ReLU,
                                    layers.View, torch.nn.Linear]
    assert isinstance(m[1], torch.nn.BatchNorm2d)
    state = m.state_dict()
    assert [k for k in state if not k.endswith("num_batches_tracked")] == [
        "1.weight", "1.bias", "2.weight", "2.bias", "2.running_mean", "2.running_var", "5.weight", "5.bias"]
    seq = wrap(lua)
    conv, bn, linear = seq.get(1), seq.get(2), seq.get(5)
    torch.testing.assert_close(state["1.weight"], _torch(conv.weight).view(3, 2, 3, 3), rtol=0, atol=0)
    for key, lua_tensor in [("1.bias", conv.bias), ("2.weight", bn.weight), ("2.running_var", bn.running_var),
                            ("5.weight", linear.weight), ("5.bias", linear.bias)]:
        assert torch.equal(state[key], _torch(lua_tensor))
    assert all(t.dtype == torch.float64 for t in state.values() if t.is_floating_point())
    with torch.no_grad():   # the converted module owns its weights
        m[4].weight.zero_()
    assert (luabridge.to_numpy(linear.weight) != 0).all()


def test_float_module_converts_to_float32():
    m = convert("nn.Sequential():add(nn.Linear(3, 2)):add(nn.SpatialBatchNormalization(2)):float()")
    assert m[0].weight.dtype == torch.float32 and m[1].running_mean.dtype == torch.float32


def test_accepts_a_proxy_a_constructor_string_and_a_luamodule():
    lua = LuaModule("nn.Linear(3, 2)")
    for source in (lua, lua.lua):
        m = convert(source)
        assert torch.equal(m.weight, lua.weight.detach())
    assert isinstance(convert("nn.Tanh()"), torch.nn.Tanh)
    for wrong in (42, wrap(luabridge.eval("torch.zeros(2)"))):
        with pytest.raises(TypeError, match="convert expects a Lua module"):
            convert(wrong)


def test_train_and_evaluate_modes_follow_the_lua_modules():
    m = convert("nn.Sequential():add(nn.Dropout(0.5)):add(nn.Sequential():add(nn.BatchNormalization(2)))")
    assert m.training and m[0].training and m[1][0].training
    lua = luabridge.eval("nn.Sequential():add(nn.Dropout(0.5)):add(nn.BatchNormalization(2))")
    wrap(lua).evaluate()
    assert not any(mod.training for mod in convert(wrap(lua)).modules())


def test_lookup_table_max_norm_renorms_the_rows_it_reads_as_torch7():
    module, x = (wrap(v) for v in _BUILD("nn.LookupTable(6, 3, 0, 1.1)", "L{1, 3, 3, 6}"))
    module.weight.numpy()[:] *= 3           # rows well above the max norm
    converted = convert(module)
    converted(_torch(x))
    module.forward(x)
    torch.testing.assert_close(converted.weight.detach(), _torch(module.weight), **TOL)
    norms = converted.weight.detach().norm(dim=1)
    assert (norms[[0, 2, 5]] <= 1.1 + 1e-6).all() and (norms[[1, 3, 4]] > 1.1).all()


# ---- dropout in training: the masks' semantics (torch7 draws from its own generator)

@pytest.mark.parametrize("ctor,scale,plane_dims", [
    ("nn.Dropout(0.4)", 1 / 0.6, 0), ("nn.Dropout(0.4, true)", 1, 0),
    ("nn.SpatialDropout(0.4)", 1, 3), ("nn.VolumetricDropout(0.4)", 1, 4)])
def test_dropout_in_training_keeps_torch7s_masks(ctor, scale, plane_dims):
    lua_module, x = (wrap(v) for v in _BUILD(ctor, "P(8, 50, 4, 4, 4)" if plane_dims == 4 else "P(40, 50, 4, 4)"))
    xt = _torch(x)
    for y in (convert(lua_module)(xt), _torch(lua_module.forward(x))):
        ratio = y / xt
        kept = ratio != 0
        torch.testing.assert_close(ratio[kept], torch.full_like(ratio[kept], scale), **TOL)
        if plane_dims:      # a whole plane is kept or dropped
            per_plane = kept.flatten(2)
            assert (per_plane.all(2) | ~per_plane.any(2)).all()
        assert abs(kept.double().mean().item() - 0.6) < 0.05


# ---- strict and non-strict

_TWICE = """
convtest = convtest or {}
local Twice, parent = torch.class('convtest.Twice', 'nn.Module')
function Twice:updateOutput(input) self.output:resizeAs(input):copy(input):mul(2); return self.output end
function Twice:updateGradInput(input, g) self.gradInput:resizeAs(g):copy(g):mul(2); return self.gradInput end
"""


@pytest.fixture(scope="module")
def model_with_a_custom_layer():
    if luabridge.eval("convtest == nil"):
        luabridge.execute(_TWICE)
    return wrap(luabridge.eval("nn.Sequential():add(nn.Linear(3, 4)):add(nn.Sequential():add(nn.Tanh())"
                               ":add(convtest.Twice())):add(nn.Linear(4, 2))"))


def test_strict_names_the_class_and_its_path(model_with_a_custom_layer):
    with pytest.raises(ConversionError, match=r"^convtest\.Twice at 2\.2 has no PyTorch counterpart$") as e:
        convert(model_with_a_custom_layer)
    assert (e.value.typename, e.value.path) == ("convtest.Twice", "2.2")
    with pytest.raises(ConversionError, match=r"^nn\.SpatialFractionalMaxPooling at <root> has no PyTorch"):
        convert("nn.SpatialFractionalMaxPooling(2, 2, 0.5, 0.5)")


def test_non_strict_keeps_a_lua_module_and_the_model_still_matches(model_with_a_custom_layer):
    lua = model_with_a_custom_layer
    m = convert(lua, strict=False)
    assert isinstance(m[1][1], LuaModule) and isinstance(m[1][0], torch.nn.Tanh)
    x = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    y = m(x)
    xl = luabridge.from_numpy(x.detach().numpy().copy())
    torch.testing.assert_close(y, _torch(lua.forward(xl)), **TOL)
    go = torch.randn(5, 2, dtype=torch.float64)
    y.backward(go)
    torch.testing.assert_close(x.grad, _torch(lua.backward(xl, luabridge.from_numpy(go.numpy()))), **TOL)


def test_converted_model_survives_torch_save_and_load():
    m = convert("nn.Sequential():add(nn.TemporalConvolution(3, 4, 2)):add(nn.Transpose({1, 2}))"
                ":add(nn.View(-1)):add(nn.Exp()):add(nn.Normalize(2)):add(nn.SoftMax())")
    buffer = io.BytesIO()
    torch.save(m, buffer)
    buffer.seek(0)
    again = torch.load(buffer, weights_only=False)
    x = torch.randn(2, 6, 3, dtype=torch.float64)
    assert torch.equal(again(x), m(x))


def test_a_convnet_trains_alike_in_both():
    """A LeNet-style net in training mode: output, input gradient and every parameter's gradient
    (autograd's against accGradParameters'), then the running statistics."""
    module, x = (wrap(v) for v in _BUILD(
        "nn.Sequential():add(nn.SpatialConvolution(3, 6, 5, 5, 1, 1, 2, 2)):add(nn.SpatialBatchNormalization(6))"
        ":add(nn.ReLU(true)):add(nn.SpatialMaxPooling(2, 2, 2, 2)):add(nn.SpatialConvolutionMM(6, 8, 3, 3))"
        ":add(nn.Tanh()):add(nn.SpatialAveragePooling(2, 2, 2, 2):ceil()):add(nn.View(-1):setNumInputDims(3))"
        ":add(nn.Dropout(0)):add(nn.Linear(8 * 3 * 3, 10)):add(nn.BatchNormalization(10)):add(nn.LogSoftMax())",
        "R(4, 3, 14, 14)"))
    converted = convert(module)
    xt = _torch(x).requires_grad_()
    y = converted(xt)
    torch.testing.assert_close(y, _torch(module.forward(x)), **TOL)
    go = torch.randn(y.shape, dtype=y.dtype)
    y.backward(go)
    module.zeroGradParameters()
    torch.testing.assert_close(xt.grad, _torch(module.backward(x, luabridge.from_numpy(go.numpy()))), **TOL)
    for name, p in converted.named_parameters():
        index, field = name.split(".")
        lua_grad = _torch(getattr(module.get(int(index)), "grad" + field.capitalize()))
        torch.testing.assert_close(p.grad, lua_grad.view(p.shape), **TOL)
    for name, b in converted.named_buffers():
        index, field = name.split(".")
        if field != "num_batches_tracked":
            torch.testing.assert_close(b, _torch(getattr(module.get(int(index)), field)), **TOL)


def test_settings_pytorch_cannot_keep_are_a_conversion_error():
    pooling = wrap(luabridge.eval("nn.Sequential():add(nn.SpatialAveragePooling(2, 2))"))
    pooling.get(1).divide = False      # torch7's oldest files: window sums
    with pytest.raises(ConversionError, match=r"^nn\.SpatialAveragePooling at 1 sums its windows"):
        convert(pooling)
    assert isinstance(convert(pooling, strict=False)[0], LuaModule)


def test_what_the_lua_tree_shares_stays_shared():
    """The same Lua module twice is one PyTorch module; weights shared by clone('weight', 'bias',
    ...) are one Parameter, whose gradient sums both uses as the shared gradWeight does in Lua."""
    lua = wrap(luabridge.eval("""(function()
      local a = nn.Linear(3, 3)
      return nn.Sequential():add(a):add(nn.Tanh()):add(a):add(nn.Tanh())
        :add(a:clone('weight', 'bias', 'gradWeight', 'gradBias'))
    end)()"""))
    m = convert(lua)
    assert m[0] is m[2] and m[1] is not m[3] and m[0] is not m[4]
    assert m[0].weight is m[4].weight and m[0].bias is m[4].bias
    assert len(list(m.parameters())) == 2
    x = torch.randn(4, 3, dtype=torch.float64)
    y = m(x)
    torch.testing.assert_close(y, _torch(lua.forward(luabridge.from_numpy(x.numpy()))), **TOL)
    go = torch.randn(4, 3, dtype=torch.float64)
    y.backward(go)
    lua.zeroGradParameters()
    lua.backward(luabridge.from_numpy(x.numpy()), luabridge.from_numpy(go.numpy()))
    torch.testing.assert_close(m[0].weight.grad, _torch(lua.get(1).gradWeight), **TOL)


def test_a_cuda_module_converts_to_a_cpu_module():
    """cutorch's tensors (numpy standing in for CuPy) come to the host: float32, as CudaTensor."""
    from luabridge import cuda

    cuda.use_array_module(np)
    try:
        lua = wrap(luabridge.eval("nn.Sequential():add(nn.Linear(3, 2)):add(nn.SpatialBatchNormalization(2)):cuda()"))
        m = convert(lua)
        assert m[0].weight.device.type == "cpu" and m[0].weight.dtype == torch.float32
        assert torch.equal(m[0].weight.detach(), torch.from_numpy(np.array(lua.get(1).weight)))
        assert torch.equal(m[1].running_var, torch.from_numpy(np.array(lua.get(2).running_var)))
    finally:
        cuda.use_array_module(None)


def test_a_recurrent_layer_carrying_its_state_is_a_conversion_error(cudnn_thread):
    def check() -> None:
        lstm = wrap(luabridge.eval("nn.Sequential():add(cudnn.LSTM(3, 4, 1, false, 0, true))"))
        with pytest.raises(ConversionError, match=r"^cudnn\.LSTM at 1 carries its hidden state from call to call"):
            convert(lstm)
        assert isinstance(convert(lstm, strict=False)[0], LuaModule)
    cudnn_thread(check)
