"""nn layers and criterions on CUDA tensors (module:cuda()): outputs, input gradients and
parameter gradients against the same module on CPU tensors, and the layers real models use
(convolutions incl. full and dilated, pooling incl. adaptive, batch norm, padding, upsampling,
LSTM, the criterions) against independent numpy float64 references."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import luabridge
from helpers import lua_fn as L


@pytest.fixture(autouse=True, scope="module")
def nn_loaded(lua):
    luabridge.require("nn")


# rnn redefines nn.Dropout (as in torch7): its layers run in a runtime of their own, on one
# worker thread, so that the other tests keep nn's Dropout (as tests/test_rnn.py does).
_RNN_WORKER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gpu-rnn-tests")


def _in_runtime(needs_rnn, fn, *args):
    """fn(*args) in this thread's runtime, or with rnn loaded on the rnn worker's."""
    if not needs_rnn:
        return fn(*args)

    def run():
        luabridge.require("rnn")
        return fn(*args)
    return _RNN_WORKER.submit(run).result()


# (constructor, input): the device path of each against its CPU path
LAYERS = [
    ("nn.Linear(3, 4)", "R(2, 3)"),
    ("nn.LeakyReLU(0.1)", "R(2, 3)"),
    ("nn.LeakyReLU(0.1, true)", "R(2, 3)"),
    ("nn.ELU(0.7)", "R(2, 3)"),
    ("nn.ELU(0.7, true)", "R(2, 3)"),
    ("nn.PReLU()", "R(2, 3)"),
    ("nn.PReLU(3)", "R(2, 3, 2, 2)"),
    ("nn.CReLU(3)", "R(2, 3, 2, 2)"),
    ("nn.GatedLinearUnit(2)", "R(3, 4)"),
    ("nn.ReLU(true)", "R(2, 3)"),
    ("nn.SoftPlus(2)", "R(2, 3):mul(8)"),
    ("nn.SoftSign()", "R(2, 3)"),
    ("nn.LogSigmoid()", "R(2, 3):mul(20)"),
    ("nn.HardShrink(0.3)", "R(2, 3)"),
    ("nn.SoftShrink(0.3)", "R(2, 3)"),
    ("nn.TanhShrink()", "R(2, 3)"),
    ("nn.Sqrt()", "P(2, 3)"),
    ("nn.Square()", "R(2, 3)"),
    ("nn.Power(2.5)", "P(2, 3)"),
    ("nn.Abs()", "R(2, 3)"),
    ("nn.Exp()", "R(2, 3)"),
    ("nn.Log()", "P(2, 3)"),
    ("nn.SoftMax()", "R(2, 5)"),
    ("nn.LogSoftMax()", "R(2, 5)"),
    ("nn.LookupTable(10, 3)", "L{{1, 4, 10}, {2, 2, 7}}"),
    ("nn.SpatialConvolution(2, 3, 3, 3, 2, 1, 1, 0)", "R(2, 2, 6, 5)"),
    ("nn.SpatialDilatedConvolution(2, 3, 3, 3, 1, 1, 2, 2, 2, 2)", "R(2, 2, 7, 6)"),
    ("nn.SpatialFullConvolution(2, 3, 3, 3, 2, 2, 1, 1, 1, 1)", "R(2, 2, 4, 5)"),
    ("nn.SpatialFullConvolution(3, 2, 2, 3, 1, 2, 0, 1):noBias()", "R(3, 4, 3)"),
    ("nn.SpatialDepthWiseConvolution(3, 2, 3, 3, 2, 1, 1, 1)", "R(2, 3, 7, 6)"),
    ("nn.SpatialConvolutionLocal(2, 3, 5, 5, 3, 3, 1, 1, 1, 1)", "R(2, 2, 5, 5)"),
    ("nn.SpatialMaxPooling(3, 3, 2, 2, 1, 1):ceil()", "R(2, 2, 7, 6)"),
    ("nn.SpatialDilatedMaxPooling(2, 2, 1, 1, 0, 0, 2, 2)", "R(2, 2, 6, 6)"),
    ("nn.SpatialAveragePooling(3, 3, 2, 2, 1, 1)", "R(2, 2, 7, 6)"),
    ("nn.SpatialAdaptiveAveragePooling(3, 2)", "R(2, 2, 7, 5)"),
    ("nn.SpatialAdaptiveMaxPooling(2, 3)", "R(2, 7, 5)"),
    ("nn.SpatialBatchNormalization(2)", "R(3, 2, 4, 4)"),
    ("nn.SpatialCrossMapLRN(4, 0.3, 0.6, 2)", "R(2, 6, 3, 3)"),
    ("nn.BatchNormalization(3)", "R(4, 3)"),
    ("nn.SpatialZeroPadding(1, -1, 2, 0)", "R(2, 2, 4, 5)"),
    ("nn.SpatialReflectionPadding(2, 1, 1, 2)", "R(2, 2, 4, 5)"),
    ("nn.SpatialReplicationPadding(1, 2, 0, 1)", "R(2, 4, 5)"),
    ("nn.VolumetricReplicationPadding(1, 1, 2, 0, 1, 0)", "R(2, 2, 3, 4, 5)"),
    ("nn.SpatialUpSamplingNearest(2)", "R(2, 2, 3, 3)"),
    ("nn.SpatialUpSamplingBilinear({oheight=5, owidth=7})", "R(2, 2, 3, 4)"),
    ("nn.TemporalConvolution(3, 4, 3, 2)", "R(2, 9, 3)"),
    ("nn.TemporalMaxPooling(3, 2)", "R(2, 9, 4)"),
    ("nn.Kmeans(3, 4)", "R(6, 4)"),
    ("nn.SeqLSTM(3, 4)", "R(5, 2, 3)"),
    ("nn.SeqGRU(3, 4)", "R(5, 2, 3)"),
    ("nn.Sequencer(nn.FastLSTM(3, 4))", "R(5, 2, 3)"),
    ("nn.Sequential():add(nn.SpatialConvolution(1, 4, 5, 5)):add(nn.ReLU()):add(nn.SpatialMaxPooling(2, 2))"
     ":add(nn.View(-1):setNumInputDims(3)):add(nn.Linear(64, 10)):add(nn.LogSoftMax())", "R(3, 1, 12, 12)"),
]

# (constructor, input, target)
CRITERIONS = [
    ("nn.MSECriterion()", "R(3, 4)", "R(3, 4)"),
    ("nn.ClassNLLCriterion(torch.Tensor{1, 2, 0.5})", "R(4, 3)", "L{1, 3, 2, 3}"),
    ("nn.CrossEntropyCriterion()", "R(4, 3)", "L{1, 3, 2, 3}"),
    ("nn.BCECriterion()", "torch.rand(3, 4):mul(0.8):add(0.1)", "torch.rand(3, 4):gt(0.5):double()"),
    ("nn.BCECriterion(torch.Tensor{1, 2, 3, 0.5}, false)", "torch.rand(3, 4):mul(0.8):add(0.1)",
     "torch.rand(3, 4):gt(0.5):double()"),
    ("nn.SmoothL1Criterion()", "R(3, 4):mul(2)", "R(3, 4)"),
    ("nn.AbsCriterion()", "R(3, 4)", "R(3, 4)"),
    ("nn.DistKLDivCriterion()", "R(3, 4)", "torch.rand(3, 4):cmul(torch.rand(3, 4):gt(0.3):double())"),
    ("nn.SoftMarginCriterion()", "R(6)", "torch.Tensor{1, -1, 1, 1, -1, -1}"),
    ("nn.MarginCriterion(0.5)", "R(6)", "torch.Tensor{1, -1, 1, 1, -1, -1}"),
    ("nn.HingeEmbeddingCriterion(0.5)", "R(6)", "torch.Tensor{1, -1, 1, 1, -1, -1}"),
    ("nn.MultiLabelSoftMarginCriterion()", "R(3, 4)", "torch.rand(3, 4):gt(0.5):double()"),
    ("nn.WeightedMSECriterion(torch.Tensor{1, 2, 3, 4})", "R(3, 4)", "R(3, 4)"),
    ("nn.SpatialClassNLLCriterion(torch.Tensor{1, 2, 0.5})", "R(2, 3, 2, 4)",
     "L{{{1, 2, 3, 1}, {3, 3, 2, 1}}, {{2, 1, 1, 3}, {1, 2, 3, 2}}}"),
]

_PRELUDE = """
local function R(...) return torch.randn(...) end
local function P(...) return torch.rand(...):add(0.5) end
local function L(t) return torch.LongTensor(t) end
local function make(src) return assert(loadstring('local R, P, L = ...; return ' .. src))(R, P, L) end
local function to(x, kind)   -- floating tensors (nested in tables too) to kind, others as they are
  if torch.isTensor(x) then return x:type() == 'torch.LongTensor' and x or x:type(kind) end
  local r = {}
  for k, v in pairs(x) do r[k] = to(v, kind) end
  return r
end
local function double(x)
  if torch.isTensor(x) then return x:double() end
  local r = {}
  for k, v in pairs(x) do r[k] = double(v) end
  return r
end
"""

# One pass on the CPU in double and one on the device (a clone): output, gradInput and the
# parameter gradients (accGradParameters with a scale) as CPU DoubleTensors.
_LAYER = _PRELUDE + """
return function(ctor, inputSrc, onDevice)
  torch.manualSeed(5)
  local m, x = make(ctor), make(inputSrc)
  local g = make('R(' .. table.concat(m:clone():forward(x:type() == 'torch.LongTensor' and x or x:double()):size():totable(), ', ') .. ')')
  m:double()
  if onDevice then m = m:cuda(); x = to(x, 'torch.CudaTensor'); g = g:cuda() end
  m:zeroGradParameters()
  local y = double(m:forward(x))
  local gi = m:updateGradInput(x, g)
  gi = torch.isTensor(gi) and gi:nElement() > 0 and double(gi) or torch.DoubleTensor()
  m:accGradParameters(x, g, 0.5)
  local _, grads = m:parameters()
  local parts = {}
  for i, p in ipairs(grads or {}) do parts[i] = p:double():view(-1) end
  return y, gi, #parts > 0 and torch.cat(parts, 1) or torch.DoubleTensor(), torch.type(m.output)
end"""


_CRITERION = _PRELUDE + """
return function(ctor, inputSrc, targetSrc, onDevice)
  torch.manualSeed(5)
  local c, x, t = make(ctor), make(inputSrc), make(targetSrc)
  c:double()
  if onDevice then c = c:cuda(); x = x:cuda(); t = to(t, 'torch.CudaTensor') end
  local loss = c:forward(x, t)
  return loss, c:backward(x, t):double(), torch.type(c.gradInput)
end"""


def _flat(t):
    return luabridge.to_numpy(t).ravel()


def _layer_passes(ctor, src):
    """(CPU arrays, device arrays, the device output's type) of _LAYER in this runtime."""
    run = luabridge.execute(_LAYER)
    cpu, dev = run(ctor, src, False), run(ctor, src, True)
    return [_flat(t).copy() for t in cpu[:3]], [_flat(t).copy() for t in dev[:3]], dev[3]


@pytest.mark.parametrize("ctor,src", LAYERS, ids=[c for c, _ in LAYERS])
def test_layer_on_device_matches_cpu(ctor, src):
    cpu, dev, kind = _in_runtime("Seq" in ctor, _layer_passes, ctor, src)
    assert kind == "torch.CudaTensor"
    for c, d in zip(cpu, dev):
        np.testing.assert_allclose(d, c, rtol=2e-4, atol=2e-5)


@pytest.mark.parametrize("ctor,src,target", CRITERIONS, ids=[c for c, _, _ in CRITERIONS])
def test_criterion_on_device_matches_cpu(ctor, src, target):
    run = luabridge.execute(_CRITERION)
    loss, gi, _ = run(ctor, src, target, False)
    dloss, dgi, kind = run(ctor, src, target, True)
    assert kind == "torch.CudaTensor"
    assert dloss == pytest.approx(loss, rel=1e-5, abs=1e-6)
    np.testing.assert_allclose(_flat(dgi), _flat(gi), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("ctor,pick", [("nn.CMaxTable()", np.argmax), ("nn.CMinTable()", np.argmin)])
def test_table_extrema_on_device(ctor, pick, rng):
    """The elementwise extreme of three tensors, its gradient routed to the first input holding it."""
    xs = np.round(rng.standard_normal((3, 4, 5)), 1)   # rounded: ties, where the first one wins
    g = rng.standard_normal((4, 5))
    y, gis = L(f"""function(a, b, c, g)
      local m = {ctor}:cuda()
      local x = {{a:cuda(), b:cuda(), c:cuda()}}
      local y = m:forward(x):double()
      local gi = m:backward(x, g:cuda())
      return y, torch.cat({{gi[1]:double(), gi[2]:double(), gi[3]:double()}}, 1)
    end""")(*(luabridge.from_numpy(x.copy()) for x in xs), luabridge.from_numpy(g))
    winner = pick(xs, axis=0)
    np.testing.assert_allclose(luabridge.to_numpy(y), np.take_along_axis(xs, winner[None], 0)[0], rtol=1e-6)
    want = np.stack([np.where(winner == i, g, 0) for i in range(3)]).reshape(12, 5)
    np.testing.assert_allclose(luabridge.to_numpy(gis), want, rtol=1e-6)


def test_dropout_on_device():
    """Training: each element dropped with probability p, the rest scaled by 1 / (1 - p), and
    the gradient through the same mask; evaluation: the identity."""
    y, gi, ev = L("""function()
      torch.cudaManualSeed(3)
      local m = nn.Dropout(0.3):cuda()
      local x = torch.CudaTensor(100000):fill(2)
      local y = m:forward(x):double()
      local gi = m:backward(x, torch.CudaTensor(100000):fill(1)):double()
      m:evaluate()
      return y, gi, m:forward(x):double()
    end""")()
    y, gi, ev = (luabridge.to_numpy(t) for t in (y, gi, ev))
    kept = y != 0
    assert kept.mean() == pytest.approx(0.7, abs=0.01)
    np.testing.assert_allclose(y[kept], 2 / 0.7, rtol=1e-6)
    np.testing.assert_array_equal(gi != 0, kept)
    np.testing.assert_array_equal(ev, 2)


# ---- independent numpy float64 references

def _device_run(ctor: str, x: np.ndarray, g: np.ndarray, setup: str = ""):
    """forward, gradInput, and the module's weight / bias gradients (scale 1) on the device in
    CudaDoubleTensor, after `setup` (Lua, with the module m) ran."""
    r = L(f"""function(x, g)
      local m = {ctor}
      m = m:type('torch.CudaDoubleTensor')
      {setup}
      m:zeroGradParameters()
      local xd, gd = x:type('torch.CudaDoubleTensor'), g:type('torch.CudaDoubleTensor')
      local y = m:forward(xd):double()
      local gi = m:backward(xd, gd):double()
      local function host(t) return t and t:double() or torch.DoubleTensor() end
      return y, gi, host(m.weight), host(m.bias), host(m.gradWeight), host(m.gradBias)
    end""")(luabridge.from_numpy(x), luabridge.from_numpy(g))
    return [luabridge.to_numpy(t).copy() for t in r]


def _correlate(x, w, stride, pad, dil):
    """Cross-correlation of x (B, C, H, W) with w (O, C, kH, kW)."""
    (dH, dW), (pH, pW), (lH, lW) = stride, pad, dil
    xp = np.pad(x, ((0, 0), (0, 0), (pH, pH), (pW, pW)))
    O, _, kH, kW = w.shape
    oH = (xp.shape[2] - (kH - 1) * lH - 1) // dH + 1
    oW = (xp.shape[3] - (kW - 1) * lW - 1) // dW + 1
    y = np.zeros((x.shape[0], O, oH, oW))
    for i in range(kH):
        for j in range(kW):
            patch = xp[:, :, i * lH:i * lH + (oH - 1) * dH + 1:dH, j * lW:j * lW + (oW - 1) * dW + 1:dW]
            y += np.einsum("oc,bchw->bohw", w[:, :, i, j], patch)
    return y


def test_dilated_convolution_against_numpy(rng):
    x, g = rng.standard_normal((2, 2, 9, 8)), rng.standard_normal((2, 3, 7, 3))
    y, gi, w, b, gw, gb = _device_run("nn.SpatialDilatedConvolution(2, 3, 3, 3, 2, 1, 1, 2, 2, 3)", x, g)
    # kW=3 kH=3 dW=2 dH=1 padW=1 padH=2 dilationW=2 dilationH=3
    want = _correlate(x, w, (1, 2), (2, 1), (3, 2)) + b[None, :, None, None]
    np.testing.assert_allclose(y, want, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(gb, g.sum((0, 2, 3)), rtol=1e-10)
    # the input gradient is the adjoint: <gi, dx> = <g, conv(dx)> for a random dx
    dx = rng.standard_normal(x.shape)
    assert (gi * dx).sum() == pytest.approx((g * _correlate(dx, w, (1, 2), (2, 1), (3, 2))).sum(), rel=1e-9)


def test_full_convolution_against_numpy(rng):
    """SpatialFullConvolution(2 -> 3, 3x3, stride 2, pad 1, adj 1): each input pixel scatters
    its weighted kernel at stride 2, the border of 1 cropped."""
    x, g = rng.standard_normal((2, 2, 4, 3)), rng.standard_normal((2, 3, 8, 6))
    y, gi, w, b, gw, gb = _device_run("nn.SpatialFullConvolution(2, 3, 3, 3, 2, 2, 1, 1, 1, 1)", x, g)
    full = np.zeros((2, 3, 2 * 3 + 3 + 1, 2 * 2 + 3 + 1))
    for i in range(4):
        for j in range(3):
            full[:, :, 2 * i:2 * i + 3, 2 * j:2 * j + 3] += np.einsum("bc,cohw->bohw", x[:, :, i, j], w)
    want = full[:, :, 1:9, 1:7] + b[None, :, None, None]
    np.testing.assert_allclose(y, want, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(gi, _correlate(g, w, (2, 2), (1, 1), (1, 1))[:, :, :4, :3], rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(gb, g.sum((0, 2, 3)), rtol=1e-10)


def test_adaptive_average_pooling_and_bilinear_upsampling_against_numpy(rng):
    x = rng.standard_normal((2, 3, 7, 5))
    y = _device_run("nn.SpatialAdaptiveAveragePooling(2, 3)", x, rng.standard_normal((2, 3, 3, 2)))[0]
    want = np.zeros((2, 3, 3, 2))
    for oy in range(3):
        for ox in range(2):
            rows = slice(oy * 7 // 3, -(-(oy + 1) * 7 // 3))
            cols = slice(ox * 5 // 2, -(-(ox + 1) * 5 // 2))
            want[:, :, oy, ox] = x[:, :, rows, cols].mean((2, 3))
    np.testing.assert_allclose(y, want, rtol=1e-12)
    # bilinear, corners aligned: output (i, j) samples the input at (i (H-1)/(oH-1), j (W-1)/(oW-1))
    up = _device_run("nn.SpatialUpSamplingBilinear({oheight=13, owidth=9})", x, rng.standard_normal((2, 3, 13, 9)))[0]
    ys, xs = np.linspace(0, 6, 13), np.linspace(0, 4, 9)
    rows = np.array([np.interp(ys, np.arange(7), col) for col in x.reshape(-1, 7, 5).transpose(0, 2, 1).reshape(-1, 7)])
    rows = rows.reshape(6, 5, 13).transpose(0, 2, 1)
    want = np.array([[np.interp(xs, np.arange(5), r) for r in plane] for plane in rows]).reshape(2, 3, 13, 9)
    np.testing.assert_allclose(up, want, rtol=1e-12, atol=1e-12)


def test_padding_against_numpy(rng):
    x = rng.standard_normal((2, 2, 4, 5))
    cases = [("nn.SpatialReflectionPadding(2, 1, 3, 0)", "reflect"), ("nn.SpatialReplicationPadding(2, 1, 3, 0)", "edge"),
             ("nn.SpatialZeroPadding(2, 1, 3, 0)", "constant")]
    for ctor, mode in cases:
        want = np.pad(x, ((0, 0), (0, 0), (3, 0), (2, 1)), mode=mode)
        g = rng.standard_normal(want.shape)
        y, gi = _device_run(ctor, x, g)[:2]
        np.testing.assert_allclose(y, want, rtol=0)
        # the gradient is the adjoint of the padding: <gi, dx> = <g, pad(dx)>
        dx = rng.standard_normal(x.shape)
        assert (gi * dx).sum() == pytest.approx((g * np.pad(dx, ((0, 0), (0, 0), (3, 0), (2, 1)), mode=mode)).sum())


def test_batch_normalization_training_against_numpy(rng):
    x, g = rng.standard_normal((4, 3, 5, 5)) * 2 + 1, rng.standard_normal((4, 3, 5, 5))
    y, gi, w, b, gw, gb = _device_run("nn.SpatialBatchNormalization(3, 1e-5)", x, g,
                                      "m.weight:copy(torch.Tensor{0.5, 2, -1}); m.bias:copy(torch.Tensor{0, 1, 3})")
    mean, var = x.mean((0, 2, 3), keepdims=True), x.var((0, 2, 3), keepdims=True)
    xhat = (x - mean) / np.sqrt(var + 1e-5)
    wk = np.array([0.5, 2, -1])[None, :, None, None]
    np.testing.assert_allclose(y, xhat * wk + np.array([0, 1, 3])[None, :, None, None], rtol=1e-10, atol=1e-10)
    m = x.shape[0] * x.shape[2] * x.shape[3]
    want_gi = wk / np.sqrt(var + 1e-5) * (g - g.mean((0, 2, 3), keepdims=True)
                                          - xhat * (g * xhat).sum((0, 2, 3), keepdims=True) / m)
    np.testing.assert_allclose(gi, want_gi, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(gw, (g * xhat).sum((0, 2, 3)), rtol=1e-10)
    np.testing.assert_allclose(gb, g.sum((0, 2, 3)), rtol=1e-10)


def test_cross_map_lrn_against_numpy(rng):
    """y = x (k + alpha/size * sum of x^2 over channels [c - 2, c + 2])^-beta (size 5)."""
    x = rng.standard_normal((2, 7, 3, 4))
    y = _device_run("nn.SpatialCrossMapLRN(5, 0.5, 0.75, 2)", x, rng.standard_normal(x.shape))[0]
    sq = np.pad(x ** 2, ((0, 0), (2, 2), (0, 0), (0, 0)))
    window = sum(sq[:, i:i + 7] for i in range(5))
    np.testing.assert_allclose(y, x * (2 + 0.5 / 5 * window) ** -0.75, rtol=1e-12)


def test_seq_lstm_against_numpy(rng):
    """SeqLSTM: a = b + [x, h] W, gates i f o g (sigmoid, tanh), c' = f c + i g, h' = o tanh(c')."""
    T, N, D, H = 4, 2, 3, 5
    x = rng.standard_normal((T, N, D))
    y, _, W, bias = _in_runtime(True, _device_run, "nn.SeqLSTM(3, 5)", x, rng.standard_normal((T, N, H)))[:4]
    sig = lambda z: 1 / (1 + np.exp(-z))   # noqa: E731
    h, c, want = np.zeros((N, H)), np.zeros((N, H)), []
    for t in range(T):
        a = bias + np.concatenate([x[t], h], 1) @ W
        i, f, o, gg = sig(a[:, :H]), sig(a[:, H:2 * H]), sig(a[:, 2 * H:3 * H]), np.tanh(a[:, 3 * H:])
        c = f * c + i * gg
        h = o * np.tanh(c)
        want.append(h)
    np.testing.assert_allclose(y, np.array(want), rtol=1e-10, atol=1e-12)


def _log_softmax(x):
    z = x - x.max(1, keepdims=True)
    return z - np.log(np.exp(z).sum(1, keepdims=True))


def test_criterions_against_numpy(rng):
    x = rng.uniform(0.05, 0.95, (3, 4))
    y = (rng.uniform(size=(3, 4)) > 0.5).astype(float)
    logits, classes = rng.standard_normal((5, 4)), np.array([1, 4, 2, 2, 3])
    run = L("""function(ctor, x, t)
      local c = loadstring('return ' .. ctor)():type('torch.CudaDoubleTensor')
      local xd = x:type('torch.CudaDoubleTensor')
      local td = t:type() == 'torch.LongTensor' and t or t:type('torch.CudaDoubleTensor')
      return c:forward(xd, td), c:backward(xd, td):double()
    end""")
    bce, bce_g = run("nn.BCECriterion()", luabridge.from_numpy(x), luabridge.from_numpy(y))
    assert bce == pytest.approx(-(y * np.log(x) + (1 - y) * np.log(1 - x)).mean(), rel=1e-9)
    np.testing.assert_allclose(luabridge.to_numpy(bce_g), (x - y) / (x * (1 - x)) / x.size, rtol=1e-9)
    z = 2 * x - y
    huber = np.where(np.abs(z) < 1, 0.5 * z ** 2, np.abs(z) - 0.5)
    l1, l1_g = run("nn.SmoothL1Criterion()", luabridge.from_numpy(2 * x), luabridge.from_numpy(y))
    assert l1 == pytest.approx(huber.mean(), rel=1e-12)
    np.testing.assert_allclose(luabridge.to_numpy(l1_g), np.clip(z, -1, 1) / z.size, rtol=1e-12)
    mse, mse_g = run("nn.MSECriterion()", luabridge.from_numpy(x), luabridge.from_numpy(y))
    assert mse == pytest.approx(((x - y) ** 2).mean(), rel=1e-12)
    ce, ce_g = run("nn.CrossEntropyCriterion()", luabridge.from_numpy(logits), luabridge.from_numpy(classes))
    lsm = _log_softmax(logits)
    assert ce == pytest.approx(-lsm[np.arange(5), classes - 1].mean(), rel=1e-12)
    onehot = np.eye(4)[classes - 1]
    np.testing.assert_allclose(luabridge.to_numpy(ce_g), (np.exp(lsm) - onehot) / 5, rtol=1e-10, atol=1e-12)
    nll, _ = run("nn.ClassNLLCriterion()", luabridge.from_numpy(lsm), luabridge.from_numpy(classes))
    assert nll == pytest.approx(ce, rel=1e-12)


def test_spatial_class_nll_against_numpy(rng):
    x = _log_softmax(rng.standard_normal((2, 3, 4, 5)))
    t = rng.integers(1, 4, (2, 4, 5))
    w = np.array([1.0, 2.0, 0.5])
    loss, gi = L("""function(x, t, w)
      local c = nn.SpatialClassNLLCriterion(w):type('torch.CudaDoubleTensor')
      local xd = x:type('torch.CudaDoubleTensor')
      return c:forward(xd, t), c:backward(xd, t:cudaLong()):double()
    end""")(luabridge.from_numpy(x), luabridge.from_numpy(t.astype(np.int64)), luabridge.from_numpy(w))
    b, yy, xx = np.indices(t.shape)
    picked, weights = x[b, t - 1, yy, xx], w[t - 1]
    assert loss == pytest.approx(-(picked * weights).sum() / weights.sum(), rel=1e-12)
    want = np.zeros_like(x)
    want[b, t - 1, yy, xx] = -weights / weights.sum()
    np.testing.assert_allclose(luabridge.to_numpy(gi), want, rtol=1e-12)


@pytest.mark.parametrize("code,message", [
    ("nn.SpatialSubSampling(2, 2, 2):cuda():forward(torch.CudaTensor(2, 5, 5))",
     "nn.SpatialSubSampling: CUDA tensors are not supported"),
    ("nn.VolumetricConvolution(2, 3, 2, 2, 2):cuda():forward(torch.CudaTensor(2, 3, 4, 4))",
     "nn.VolumetricConvolution: CUDA tensors are not supported"),
    ("nn.RReLU():cuda():forward(torch.CudaTensor(2, 3))", r"nn.RReLU: torch.CudaTensor is not supported \(CPU kernel\)"),
    ("nn.MultiMarginCriterion():cuda():forward(torch.CudaTensor(2, 3), torch.CudaTensor{1, 2})",
     "nn.MultiMarginCriterion: torch.CudaTensor is not supported"),
    ("nn.TemporalSubSampling(3, 2):cuda():forward(torch.CudaTensor(4, 3))",
     r"temporal subsampling: torch.CudaTensor is not supported \(a CPU loop\)"),
])
def test_left_out_layers_say_so(code, message):
    with pytest.raises(luabridge.LuaError, match=message):
        L(f"function() return {code} end")()
