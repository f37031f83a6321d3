"""luabridge.torch.convert: every layer converter (convert_layers) gives a native PyTorch module
whose output, on random double inputs, equals the Lua module's to 1e-10, and whose input
gradient through PyTorch's autograd equals the Lua module's updateGradInput; the module types
and weights are PyTorch's own; strict mode names the class and path it cannot convert, and
strict=False keeps it as a LuaModule inside a model that still matches."""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable
from unittest import mock

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is missing (pip install torch): luabridge.torch needs it")

import luabridge  # noqa: E402
from helpers import lua_fn  # noqa: E402
from luabridge.proxy import wrap  # noqa: E402
from luabridge.torch import LuaModule  # noqa: E402
from luabridge.torch import convert_layers  # noqa: E402
from luabridge.torch.convert import CONVERTERS, ConversionError, convert  # noqa: E402

TOL = dict(rtol=1e-10, atol=1e-10)

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
    ("nn.Bilinear(3, 4, 2)", "{R(5, 3), R(5, 4)}"),
    ("nn.Bilinear(3, 4, 2, false)", "{R(5, 3), R(5, 4)}"),
    ("nn.SpatialConvolution(2, 3, 3, 3, 2, 1, 1, 1)", "R(2, 2, 7, 6)"),
    ("nn.SpatialConvolution(2, 3, 3, 2):noBias()", "R(2, 5, 6)"),
    ("nn.SpatialConvolutionMM(2, 3, 3, 2, 1, 2, 1, 0)", "R(2, 2, 6, 6)"),
    ("nn.SpatialDilatedConvolution(2, 3, 3, 3, 1, 2, 2, 1, 2, 3)", "R(2, 2, 9, 10)"),
    ("nn.SpatialFullConvolution(2, 3, 3, 3, 2, 2, 1, 1, 1, 0)", "R(2, 2, 4, 5)"),
    ("nn.SpatialFullConvolution(2, 3, 2, 3):noBias()", "R(2, 4, 5)"),
    ("nn.VolumetricConvolution(2, 3, 3, 3, 2, 1, 2, 1, 1, 0, 1)", "R(2, 2, 5, 6, 5)"),
    ("nn.VolumetricFullConvolution(2, 3, 3, 2, 3, 2, 2, 2, 1, 0, 1, 1, 1, 0)", "R(2, 2, 3, 4, 3)"),
    ("nn.VolumetricDilatedConvolution(2, 3, 2, 3, 3, 1, 1, 2, 0, 1, 1, 2, 2, 1)", "R(2, 2, 5, 6, 7)"),
    ("nn.TemporalConvolution(3, 4, 3, 2)", "R(8, 3)"),
    ("nn.TemporalConvolution(3, 4, 2)", "R(2, 7, 3)"),
    # pooling
    ("nn.SpatialMaxPooling(3, 3, 2, 2, 1, 1):ceil()", "R(2, 2, 8, 8)"),
    ("nn.SpatialMaxPooling(2, 2)", "R(2, 6, 7)"),
    ("nn.SpatialDilatedMaxPooling(3, 2, 1, 2, 1, 1, 2, 1)", "R(2, 2, 7, 8)"),
    ("nn.SpatialAveragePooling(3, 3, 2, 2, 1, 1):ceil()", "R(1, 2, 8, 7)"),
    ("nn.SpatialAveragePooling(3, 2, 2, 2, 1, 1):ceil():setCountExcludePad()", "R(2, 8, 7)"),
    ("nn.SpatialAveragePooling(2, 2)", "R(2, 2, 5, 5)"),
    ("nn.VolumetricMaxPooling(2, 2, 2, 2, 2, 2, 1, 1, 1):ceil()", "R(2, 2, 5, 4, 5)"),
    ("nn.VolumetricDilatedMaxPooling(2, 2, 2, 1, 1, 1, 0, 1, 0, 2, 1, 2)", "R(2, 5, 4, 5)"),
    ("nn.VolumetricAveragePooling(2, 2, 2, 1, 2, 2)", "R(2, 2, 4, 5, 6)"),
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
    ("nn.Identity()", "R(2, 3)"), ("nn.Contiguous()", "R(2, 3)"),
    ("nn.Copy('torch.DoubleTensor', 'torch.FloatTensor')", "R(2, 3)"),
    # containers
    ("nn.Sequential():add(nn.Linear(3, 4)):add(nn.Tanh()):add(nn.Sequential():add(nn.Linear(4, 2)))", "R(2, 3)"),
    ("nn.Concat(2):add(nn.Linear(3, 2)):add(nn.Linear(3, 4))", "R(2, 3)"),
    ("nn.DepthConcat(2):add(nn.SpatialConvolution(2, 3, 3, 3)):add(nn.SpatialConvolution(2, 2, 1, 1))"
     ":add(nn.SpatialConvolution(2, 1, 2, 2))", "R(2, 2, 5, 5)"),
    ("nn.Parallel(2, 2):add(nn.Linear(3, 2)):add(nn.Linear(3, 4))", "R(3, 2, 3)"),
]

# cudnn's classes (without a GPU: LUABRIDGE_CUDA_ON_CPU=1), in a runtime of their own.
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
        pool.submit(luabridge.require, "cudnn").result()

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
