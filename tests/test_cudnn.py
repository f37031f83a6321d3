"""cudnn without a GPU (LUABRIDGE_CUDA_ON_CPU=1): the cudnn.torch classes that
checkpoints hold, cudnn.convert both ways, the fused recurrent layers with cuDNN's flat weight
(checked against a float64 numpy implementation of the LSTM / GRU / RNN equations and finite
differences), files with cudnn class names. (require without a device: test_helpers_pkgs.py.)

cudnn's classes load as themselves only after require 'cudnn' (before, lua/nn/util/legacy.lua reads
the nn-like ones as nn classes), so everything here runs in one thread of its own whose runtime
has cudnn loaded: the other test files' runtime stays without it.
"""
from __future__ import annotations

import os
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

import numpy as np
import pytest

import luabridge
from helpers import N, lua_fn, numeric_grad
from luabridge import t7

GATES = {"CUDNN_LSTM": 4, "CUDNN_GRU": 3, "CUDNN_RNN_TANH": 1, "CUDNN_RNN_RELU": 1}


def _plain(x: Any) -> Any:
    """Lua results as Python values: tensors as numpy copies (in the thread that owns them)."""
    if isinstance(x, tuple):
        return tuple(_plain(v) for v in x)
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    return N(x)


@pytest.fixture(scope="module")
def cudnn_lua():
    """lua(code)(*args): the Lua function `code` run in the cudnn thread, its results as numpy."""
    pool = ThreadPoolExecutor(max_workers=1)
    old = os.environ.get("LUABRIDGE_CUDA_ON_CPU")
    os.environ["LUABRIDGE_CUDA_ON_CPU"] = "1"
    try:
        pool.submit(luabridge.require, "cudnn").result()
    finally:
        if old is None:
            del os.environ["LUABRIDGE_CUDA_ON_CPU"]
        else:
            os.environ["LUABRIDGE_CUDA_ON_CPU"] = old

    def lua(code: str) -> Callable[..., Any]:
        fn = lua_fn(code)
        return lambda *args: pool.submit(lambda: _plain(fn(*args))).result()
    yield lua
    pool.shutdown()


@pytest.fixture
def rng():
    return np.random.default_rng(7)


# ---- the package ----------------------------------------------------------------------------

def test_settings_and_version(cudnn_lua):
    got = cudnn_lua("""function()
      return cudnn.version, tostring(cudnn.benchmark), tostring(cudnn.fastest), type(cudnn.reset),
        torch.type(cudnn.SpatialConvolution(1, 1, 1, 1)), tostring(torch.isTypeOf(cudnn.ReLU(), 'nn.ReLU'))
    end""")()
    assert got[0] >= 5005 and isinstance(got[0], int)
    assert got[1:] == ("false", "false", "function", "cudnn.SpatialConvolution", "true")


def test_cutorch_host_tensors_and_memory(cudnn_lua):
    """cutorch's pinned host tensors are CPU tensors of the size given (numbers or a
    LongStorage); getMemoryUsage and getDeviceProperties report the host memory in bytes."""
    got = cudnn_lua("""function()
      local a, b = cutorch.createCudaHostTensor(2, 3), cutorch.createCudaHostDoubleTensor(torch.LongStorage{4})
      local c = cutorch.createCudaHostHalfTensor(5)
      local free, total = cutorch.getMemoryUsage(1)
      local props = cutorch.getDeviceProperties(1)
      local ok, err = pcall(cutorch.getMemoryUsage, 2)
      return torch.type(a) .. ' ' .. table.concat(a:size():totable(), 'x') .. ' ' .. torch.type(b) .. ' '
        .. b:nElement() .. ' ' .. torch.type(c) .. ' ' .. c:nElement(), free, total, props.totalGlobalMem,
        tostring(cutorch.getKernelPeerToPeerAccess()), err
    end""")()
    kinds, free, total, props_total, peer, err = got
    assert kinds == "torch.FloatTensor 2x3 torch.DoubleTensor 4 torch.HalfTensor 5"
    if os.path.exists("/proc/meminfo"):
        with open("/proc/meminfo") as f:
            kb = int(re.search(r"MemTotal:\s*(\d+) kB", f.read()).group(1))
        assert total == props_total == kb * 1024 and 0 < free <= total
    assert peer == "true" and "cutorch.getMemoryUsage: device 2 does not exist (1 device)" in err


# ---- the fused recurrent layers: a float64 reference ----------------------------------------

def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x))


def _blocks(w: np.ndarray, mode: str, inputs: int, H: int, layers: int, dirs: int) -> list:
    """cuDNN's flat weight: per layer and direction, the G input matrices (H x inputs), the G
    recurrent ones (H x H), the G input biases, the G recurrent biases."""
    G, off, out = GATES[mode], 0, []

    def take(*shape: int) -> np.ndarray:
        nonlocal off
        n = int(np.prod(shape))
        v = w[off:off + n].reshape(shape)
        off += n
        return v
    for layer in range(layers):
        n_in = inputs if layer == 0 else H * dirs
        for _ in range(dirs):
            out.append((take(G, H, n_in), take(G, H, H), take(G, H), take(G, H)))
    assert off == w.size
    return out


def _step(mode: str, x, h, c, W, R, bW, bR):
    a = [x @ W[g].T + bW[g] for g in range(len(W))]
    r = [h @ R[g].T + bR[g] for g in range(len(R))]
    if mode == "CUDNN_LSTM":
        i, f, g, o = _sigmoid(a[0] + r[0]), _sigmoid(a[1] + r[1]), np.tanh(a[2] + r[2]), _sigmoid(a[3] + r[3])
        c = f * c + i * g
        return o * np.tanh(c), c
    if mode == "CUDNN_GRU":
        rg, z = _sigmoid(a[0] + r[0]), _sigmoid(a[1] + r[1])
        n = np.tanh(a[2] + rg * r[2])
        return (1 - z) * n + z * h, c
    pre = a[0] + r[0]
    return (np.tanh(pre) if mode == "CUDNN_RNN_TANH" else np.maximum(pre, 0)), c


def reference(mode: str, x: np.ndarray, w: np.ndarray, H: int, layers: int, dirs: int,
              hx: np.ndarray | None = None, cx: np.ndarray | None = None):
    """Output (T x B x dirs*H), final hidden and cell states (layers*dirs x B x H)."""
    T, B, _ = x.shape
    params = _blocks(w, mode, x.shape[2], H, layers, dirs)
    hy, cy, inp = [], [], x
    for layer in range(layers):
        outs = []
        for d in range(dirs):
            k = layer * dirs + d
            h = np.zeros((B, H)) if hx is None else hx[k]
            c = np.zeros((B, H)) if cx is None else cx[k]
            ys = [None] * T
            for t in (range(T) if d == 0 else reversed(range(T))):
                h, c = _step(mode, inp[t], h, c, *params[k])
                ys[t] = h
            outs.append(np.stack(ys))
            hy.append(h)
            cy.append(c if mode == "CUDNN_LSTM" else np.zeros((B, H)))
        inp = np.concatenate(outs, axis=2)
    return inp, np.stack(hy), np.stack(cy)


RUN_RNN = """function(class, I, H, L, batchFirst, w, x, hx, cx, gy, ghy, gcy)
  local m = cudnn[class](I, H, L, batchFirst):double()
  m.weight:copy(w)
  m.hiddenInput, m.cellInput = hx, cx
  m.gradHiddenOutput, m.gradCellOutput = ghy, gcy
  local y = m:forward(x)
  m:zeroGradParameters()
  local gx = m:backward(x, gy)
  return y, m.hiddenOutput, m.cellOutput, gx, m.gradWeight, m.gradHiddenInput, m.gradCellInput, m.weight:nElement()
end"""

CLASSES = [("LSTM", "CUDNN_LSTM", 1), ("GRU", "CUDNN_GRU", 1), ("RNNTanh", "CUDNN_RNN_TANH", 1),
           ("RNNReLU", "CUDNN_RNN_RELU", 1), ("BLSTM", "CUDNN_LSTM", 2), ("BGRU", "CUDNN_GRU", 2)]


@pytest.mark.parametrize("cls,mode,dirs", CLASSES)
def test_recurrent_forward_and_backward(cudnn_lua, rng, cls, mode, dirs):
    """Two layers, given initial states and state gradients: outputs and final states against
    the float64 equations, every gradient against central differences of the reference."""
    I, H, L, T, B = 3, 2, 2, 3, 2
    G = GATES[mode]
    size = sum(dirs * G * H * ((I if layer == 0 else H * dirs) + H + 2) for layer in range(L))
    w = rng.uniform(-0.6, 0.6, size)
    x = rng.standard_normal((T, B, I))
    hx, cx = rng.standard_normal((L * dirs, B, H)), rng.standard_normal((L * dirs, B, H))
    gy, ghy, gcy = rng.standard_normal((T, B, dirs * H)), rng.standard_normal(hx.shape), rng.standard_normal(hx.shape)
    lstm = mode == "CUDNN_LSTM"
    y, hy, cy, gx, gw, ghx, gcx, n = cudnn_lua(RUN_RNN)(cls, I, H, L, False, w, x, hx, cx if lstm else None,
                                                         gy, ghy, gcy if lstm else None)
    assert n == size
    ry, rhy, rcy = reference(mode, x, w, H, L, dirs, hx, cx if lstm else None)
    np.testing.assert_allclose(y, ry, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(hy, rhy, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(cy, rcy, rtol=1e-10, atol=1e-12)

    def loss() -> float:
        oy, ohy, ocy = reference(mode, x, w, H, L, dirs, hx, cx if lstm else None)
        return float((oy * gy).sum() + (ohy * ghy).sum() + ((ocy * gcy).sum() if lstm else 0))
    for got, wrt in [(gx, x), (gw, w), (ghx, hx)] + ([(gcx, cx)] if lstm else []):
        np.testing.assert_allclose(got, numeric_grad(loss, wrt), rtol=1e-5, atol=1e-7)


@pytest.mark.slow
def test_lstm_against_cudnn_sample_checksums(cudnn_lua):
    """The checksums NVIDIA's cuDNN RNN sample prints for a 2-layer LSTM (512 inputs and hidden
    units, batch 64, 20 steps; every matrix 1 / its size, biases, input, initial states and
    output gradients 1), as cudnn.torch's test_rnn.lua quotes them: sums of the output, final
    cell and hidden states, gradInput, their gradients and gradWeight."""
    sums = cudnn_lua("""function()
      local m = cudnn.LSTM(512, 512, 2):float()
      for _, layer in ipairs(m:weights()) do for _, w in ipairs(layer) do w:fill(1 / w:nElement()) end end
      for _, layer in ipairs(m:biases()) do for _, b in ipairs(layer) do b:fill(1) end end
      local function ones(...) return torch.FloatTensor(...):fill(1) end
      m.hiddenInput, m.cellInput = ones(2, 64, 512), ones(2, 64, 512)
      m.gradHiddenOutput, m.gradCellOutput = ones(2, 64, 512), ones(2, 64, 512)
      local x = ones(20, 64, 512)
      local y = m:forward(x)
      m:backward(x, ones(20, 64, 512))
      return y:sum(), m.cellOutput:sum(), m.hiddenOutput:sum(), m.gradInput:sum(), m.gradCellInput:sum(),
        m.gradHiddenInput:sum(), m.gradWeight:sum()
    end""")()
    cudnn_sample = (5.749536e+05, 4.365091e+05, 5.774818e+04, 3.842206e+02, 9.323785e+03, 1.182566e+01, 4.313461e+08)
    np.testing.assert_allclose(sums, cudnn_sample, rtol=2e-5)


def test_batch_first_and_no_initial_state(cudnn_lua, rng):
    I, H, T, B = 2, 3, 4, 3
    size = 2 * 4 * H * (I + H + 2)
    w, x = rng.uniform(-0.5, 0.5, size), rng.standard_normal((B, T, I))
    y, hy, _, gx, *_ = cudnn_lua(RUN_RNN)("BLSTM", I, H, 1, True, w, x, None, None,
                                           np.ones((B, T, 2 * H)), None, None)
    ry, rhy, _ = reference("CUDNN_LSTM", x.transpose(1, 0, 2), w, H, 1, 2)
    np.testing.assert_allclose(y, ry.transpose(1, 0, 2), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(hy, rhy, rtol=1e-10, atol=1e-12)
    xt = x.transpose(1, 0, 2).copy()
    num = numeric_grad(lambda: float(reference("CUDNN_LSTM", xt, w, H, 1, 2)[0].sum()), xt)
    np.testing.assert_allclose(gx, num.transpose(1, 0, 2), rtol=1e-5, atol=1e-7)


def test_flat_weight_views(cudnn_lua):
    """weights() and biases(): per layer and direction, cuDNN's linear layers in order."""
    I, H = 3, 2
    size = 2 * 3 * H * (I + H + 2)
    w = np.arange(size, dtype=float)
    got = cudnn_lua("""function(w, I, H)
      local m = cudnn.BGRU(I, H, 1):double()
      m.weight:copy(w)
      local ws, bs = m:weights(), m:biases()
      local out = {}
      for l = 1, #ws do
        for _, v in ipairs(ws[l]) do out[#out + 1] = v[1]; out[#out + 1] = v:nElement() end
        for _, v in ipairs(bs[l]) do out[#out + 1] = v[1]; out[#out + 1] = v:nElement() end
      end
      return torch.Tensor(out)
    end""")(w, I, H)
    want = []
    for W, R, bW, bR in _blocks(w, "CUDNN_GRU", I, H, 1, 2):
        for part in (*W, *R, *bW, *bR):
            want += [part.flat[0], part.size]
    np.testing.assert_array_equal(got, want)


def test_packed_sequences(cudnn_lua, rng):
    """A packed batch (lengths 3, 2, 1) runs each sequence over its own length only, both
    directions; padPackedSequence gives the padded output and the lengths back."""
    I, H, lengths = 2, 3, [3, 2, 1]
    size = 2 * 3 * H * (I + H + 2)
    w, x = rng.uniform(-0.5, 0.5, size), rng.standard_normal((3, 3, I))
    got = cudnn_lua("""function(w, x)
      local m = cudnn.BGRU(2, 3, 1):double()
      m.weight:copy(w)
      local packed = m:packPaddedSequence(x, {3, 2, 1})
      local y = m:forward(packed)
      local padded, lengths = m:padPackedSequence({y, packed[2]})
      local gx = m:backward(packed, torch.ones(y:size()))
      return padded, m.hiddenOutput, torch.Tensor(lengths), packed[1], gx
    end""")(w, x)
    padded, hy, got_lengths, data, gx = got
    assert got_lengths.tolist() == lengths
    np.testing.assert_array_equal(data, np.concatenate([x[t, :n] for t, n in enumerate([3, 2, 1])]))
    gx_rows, row = {}, 0
    for t, n in enumerate([3, 2, 1]):
        for b in range(n):
            gx_rows[(t, b)] = gx[row]
            row += 1
    for b, n in enumerate(lengths):
        seq = x[:n, b:b + 1].copy()
        ry, rhy, _ = reference("CUDNN_GRU", seq, w, H, 1, 2)
        np.testing.assert_allclose(padded[:n, b], ry[:, 0], rtol=1e-10, atol=1e-12)
        assert not padded[n:, b].any()
        np.testing.assert_allclose(hy[:, b], rhy[:, 0], rtol=1e-10, atol=1e-12)
        num = numeric_grad(lambda: float(reference("CUDNN_GRU", seq, w, H, 1, 2)[0].sum()), seq)
        np.testing.assert_allclose(np.stack([gx_rows[(t, b)] for t in range(n)]), num[:, 0], rtol=1e-5, atol=1e-7)


def test_remember_states_and_dropout(cudnn_lua, rng):
    """rememberStates starts each sequence from the last one's final state; dropout between
    layers acts in training only."""
    I, H = 2, 2
    size = 4 * H * (I + H + 2) + 4 * H * (H + H + 2)
    w, x1, x2 = rng.uniform(-0.5, 0.5, size), rng.standard_normal((2, 1, I)), rng.standard_normal((3, 1, I))
    y2, evaluated, trained = cudnn_lua("""function(w, x1, x2)
      local m = cudnn.LSTM(2, 2, 2, false, 0.5, true):double()
      m.weight:copy(w)
      m:evaluate()
      m:forward(x1)
      local y2 = m:forward(x2):clone()
      m:resetStates()
      local evaluated = m:forward(x2):clone()
      m:training()
      torch.manualSeed(3)
      local trained = m:forward(x2):clone()
      return y2, evaluated, trained
    end""")(w, x1, x2)
    _, h1, c1 = reference("CUDNN_LSTM", x1, w, H, 2, 1)
    np.testing.assert_allclose(y2, reference("CUDNN_LSTM", x2, w, H, 2, 1, h1, c1)[0], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(evaluated, reference("CUDNN_LSTM", x2, w, H, 2, 1)[0], rtol=1e-10, atol=1e-12)
    assert not np.allclose(trained, evaluated)


def test_recurrent_errors(cudnn_lua):
    err = cudnn_lua("""function()
      local m = cudnn.LSTM(3, 2, 1):double()
      local msgs = {}
      for _, f in ipairs {
        function() m:forward(torch.randn(4, 2, 5)) end,
        function() m:forward(torch.randn(4, 3)) end,
        function() m.hiddenInput = torch.randn(1, 5, 2); m:forward(torch.randn(4, 2, 3)) end,
        function() m.hiddenInput = nil; m.weight = torch.randn(7); m:forward(torch.randn(4, 2, 3)) end,
      } do
        local ok, e = pcall(f)
        msgs[#msgs + 1] = tostring(e)
      end
      return table.concat(msgs, '\\n')
    end""")()
    lines = err.split("\n")
    assert "cudnn.LSTM: input has 5 features per step, expected inputSize 3" in lines[0]
    assert "cudnn.LSTM: input must have 3 dimensions: seqLength, miniBatch, inputSize (got 4x3)" in lines[1]
    assert "cudnn.LSTM: hiddenInput must be 1 x 2 x 2" in lines[2] and "got 1x5x2" in lines[2]
    assert "cudnn.LSTM: weight must be a vector of 56 elements" in lines[3] and "got 7" in lines[3]


# ---- files ------------------------------------------------------------------------------------

def test_cudnn_torch_lstm_file(cudnn_lua, rng, tmp_path):
    """A cudnn.LSTM with the fields cudnn.torch saves (float weight, descriptors cleared, no
    batchFirst / rememberStates in older versions) loads as cudnn.LSTM and runs."""
    I, H = 3, 2
    size = 4 * H * (I + H + 2)
    w = rng.uniform(-0.5, 0.5, size).astype(np.float32)
    fields = {"inputSize": I, "hiddenSize": H, "numLayers": 1, "seqLength": 1, "miniBatch": 1,
              "datatype": "CUDNN_DATA_FLOAT", "bidirectional": "CUDNN_UNIDIRECTIONAL", "numDirections": 1,
              "inputMode": "CUDNN_LINEAR_INPUT", "mode": "CUDNN_LSTM", "dropout": 0, "seed": 0x01234567,
              "train": True, "weight": w, "gradWeight": np.zeros(size, np.float32),
              "output": np.zeros(0, np.float32), "gradInput": np.zeros(0, np.float32),
              "hiddenOutput": np.zeros(0, np.float32), "cellOutput": np.zeros(0, np.float32),
              "reserve": np.zeros(5, np.float32)}
    path = tmp_path / "lstm.t7"
    t7.write(path, t7.TorchObject("nn.Sequential", 1, {"modules": {1: t7.TorchObject("cudnn.LSTM", 1, fields)},
                                                       "train": True, "output": np.zeros(0), "gradInput": np.zeros(0)}))
    x = rng.standard_normal((4, 2, I)).astype(np.float32)
    name, y = cudnn_lua("""function(p, x)
      local net = torch.load(p)
      return torch.type(net.modules[1]), net:forward(x)
    end""")(str(path), x)
    assert name == "cudnn.LSTM"
    np.testing.assert_allclose(y, reference("CUDNN_LSTM", x.astype(float), w.astype(float), H, 1, 1)[0],
                               rtol=2e-5, atol=1e-6)


def _conv_groups(x: np.ndarray, w: np.ndarray, b: np.ndarray, groups: int) -> np.ndarray:
    """batch x planes x H x W input, stride 1, no padding, planes split in groups."""
    B, C, Hh, Ww = x.shape
    O, cg, kh, kw = w.shape
    og = O // groups
    y = np.zeros((B, O, Hh - kh + 1, Ww - kw + 1))
    for o in range(O):
        g = o // og
        for i in range(y.shape[2]):
            for j in range(y.shape[3]):
                patch = x[:, g * cg:(g + 1) * cg, i:i + kh, j:j + kw]
                y[:, o, i, j] = (patch * w[o]).sum(axis=(1, 2, 3)) + b[o]
    return y


def test_grouped_convolution_file(cudnn_lua, rng, tmp_path):
    """A cudnn.SpatialConvolution with groups (as cudnn.torch saves it) loads as itself, and its
    forward and backward are those of the grouped convolution."""
    w, b = rng.standard_normal((6, 2, 2, 2)), rng.standard_normal(6)
    fields = {"nInputPlane": 6, "nOutputPlane": 6, "kW": 2, "kH": 2, "dW": 1, "dH": 1, "padW": 0, "padH": 0,
              "groups": 3, "weight": w, "bias": b, "gradWeight": np.zeros_like(w), "gradBias": np.zeros(6),
              "output": np.zeros(0), "gradInput": np.zeros(0), "train": True}
    path = tmp_path / "conv.t7"
    t7.write(path, t7.TorchObject("cudnn.SpatialConvolution", 1, fields))
    x, gy = rng.standard_normal((2, 6, 4, 3)), rng.standard_normal((2, 6, 3, 2))
    name, y, gx, gw = cudnn_lua("""function(p, x, gy)
      local m = torch.load(p)
      local y = m:forward(x)
      m:zeroGradParameters()
      return torch.type(m), y, m:backward(x, gy), m.gradWeight
    end""")(str(path), x, gy)
    assert name == "cudnn.SpatialConvolution"
    np.testing.assert_allclose(y, _conv_groups(x, w, b, 3), rtol=1e-10, atol=1e-12)
    loss = lambda: float((_conv_groups(x, w, b, 3) * gy).sum())  # noqa: E731
    np.testing.assert_allclose(gx, numeric_grad(loss, x), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gw, numeric_grad(loss, w), rtol=1e-6, atol=1e-8)


def _pool(x: np.ndarray, k: int, d: int, pad: int, fill: float, reduce) -> np.ndarray:
    """k x k windows every d over x padded by pad with fill, reduced over each window."""
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)), constant_values=fill)
    n = (xp.shape[2] - k) // d + 1
    return np.stack([np.stack([reduce(xp[:, :, d * i:d * i + k, d * j:d * j + k], axis=(2, 3))
                               for j in range(n)], -1) for i in range(n)], -2)


def _lrn(x: np.ndarray, size: int, alpha: float, beta: float, k: float) -> np.ndarray:
    sq, half = x ** 2, size // 2
    scale = [k + alpha / size * sq[:, max(0, c - half):c + half + 1].sum(axis=1) for c in range(x.shape[1])]
    return x / np.stack(scale, 1) ** beta


_BN = {"running_mean": np.array([0.5, -1, 0, 2]), "running_var": np.array([1, 0.5, 2, 0.25]),
       "weight": np.array([1, 2, -1, 0.5]), "bias": np.array([0, 1, -2, 0.5])}
# cudnn.torch's fields, which differ from nn's: activations without threshold/val (ReLU) or
# min_val/max_val (ClippedReLU), K for LRN's k (older versions), average pooling from before
# ceil_mode and count_include_pad, batch normalization with mode and save_std.
LAYER_FILES = [
    ("cudnn.ReLU", {"inplace": False, "mode": "CUDNN_ACTIVATION_RELU"}, lambda x: np.maximum(x, 0)),
    ("cudnn.ClippedReLU", {"inplace": False, "ceiling": 0.4}, lambda x: np.clip(x, 0, 0.4)),
    ("cudnn.Sigmoid", {"inplace": False, "mode": "CUDNN_ACTIVATION_SIGMOID"}, lambda x: 1 / (1 + np.exp(-x))),
    ("cudnn.SpatialCrossMapLRN", {"size": 3, "alpha": 0.1, "beta": 0.75, "K": 2.0},
     lambda x: _lrn(x, 3, 0.1, 0.75, 2.0)),
    ("cudnn.SpatialMaxPooling", {"kW": 3, "kH": 3, "dW": 2, "dH": 2, "padW": 1, "padH": 1, "ceil_mode": False,
                                 "mode": "CUDNN_POOLING_MAX"}, lambda x: _pool(x, 3, 2, 1, -np.inf, np.max)),
    ("cudnn.SpatialAveragePooling", {"kW": 3, "kH": 3, "dW": 2, "dH": 2, "padW": 1, "padH": 1, "ceil_mode": False,
                                     "mode": "CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING"},
     lambda x: _pool(x, 3, 2, 1, 0, np.mean)),
    # a file from before ceil_mode: cudnn.torch's backwardCompatible drops its padding
    ("cudnn.SpatialAveragePooling", {"kW": 3, "kH": 3, "dW": 2, "dH": 2, "padW": 1, "padH": 1,
                                     "mode": "CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING"},
     lambda x: _pool(x, 3, 2, 0, 0, np.mean)),
    ("cudnn.SpatialBatchNormalization", {"affine": True, "eps": 1e-5, "momentum": 0.1, "nDim": 4,
                                         "mode": "CUDNN_BATCHNORM_SPATIAL", "save_mean": np.zeros(4),
                                         "save_std": np.zeros(4), **_BN},
     lambda x: (x - _BN["running_mean"][:, None, None]) / np.sqrt(_BN["running_var"][:, None, None] + 1e-5)
     * _BN["weight"][:, None, None] + _BN["bias"][:, None, None]),
]


@pytest.mark.parametrize("name,fields,want", LAYER_FILES, ids=[f"{c[0]}-{i}" for i, c in enumerate(LAYER_FILES)])
def test_cudnn_torch_layer_files(cudnn_lua, rng, tmp_path, name, fields, want):
    """Layers with the fields cudnn.torch writes load as their cudnn class and compute as cuDNN."""
    path = tmp_path / "layer.t7"
    t7.write(path, t7.TorchObject(name, 1, {**fields, "train": False, "output": np.zeros(0),
                                            "gradInput": np.zeros(0)}))
    x = rng.standard_normal((2, 4, 5, 5))
    got, y = cudnn_lua("""function(p, x)
      local m = torch.load(p)
      return torch.type(m), m:forward(x)
    end""")(str(path), x.copy())
    assert got == name
    np.testing.assert_allclose(y, want(x), rtol=1e-10, atol=1e-12)


def _log_softmax(x: np.ndarray, axis) -> np.ndarray:
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


def test_criterion_and_softmax_files(cudnn_lua, rng, tmp_path):
    """cudnn.SpatialCrossEntropyCriterion (slsm and nll inside) and cudnn.VolumetricLogSoftMax
    (ssm inside, a SpatialSoftMax with the log algorithm) as cudnn.torch writes them."""
    slsm = t7.TorchObject("cudnn.SpatialLogSoftMax", 1, {"mode": "CUDNN_SOFTMAX_MODE_CHANNEL",
                                                         "algorithm": "CUDNN_SOFTMAX_LOG", "train": True,
                                                         "output": np.zeros(0), "gradInput": np.zeros(0)})
    nll = t7.TorchObject("nn.SpatialClassNLLCriterion", 1, {"sizeAverage": True, "output_tensor": np.zeros(1),
                                                            "total_weight_tensor": np.ones(1), "output": 0,
                                                            "gradInput": np.zeros(0)})
    crit = t7.TorchObject("cudnn.SpatialCrossEntropyCriterion", 1, {"slsm": slsm, "nll": nll, "sizeAverage": True,
                                                                    "output": 0, "gradInput": np.zeros(0)})
    ssm = t7.TorchObject("cudnn.SpatialSoftMax", 1, {"mode": "CUDNN_SOFTMAX_MODE_CHANNEL",
                                                     "algorithm": "CUDNN_SOFTMAX_LOG", "train": True,
                                                     "output": np.zeros(0), "gradInput": np.zeros(0)})
    vlsm = t7.TorchObject("cudnn.VolumetricLogSoftMax", 1, {"ssm": ssm, "train": True, "output": np.zeros(0),
                                                             "gradInput": np.zeros(0)})
    t7.write(tmp_path / "c.t7", crit)
    t7.write(tmp_path / "v.t7", vlsm)
    x, target = rng.standard_normal((2, 3, 2, 4)), rng.integers(1, 4, (2, 2, 4)).astype(float)
    v = rng.standard_normal((2, 3, 2, 2, 2))
    names, loss, grad, vy = cudnn_lua("""function(pc, pv, x, t, v)
      local c, m = torch.load(pc), torch.load(pv)
      local loss = c:forward(x, t)
      return torch.type(c) .. ' ' .. torch.type(m), loss, c:backward(x, t), m:forward(v)
    end""")(str(tmp_path / "c.t7"), str(tmp_path / "v.t7"), x, target, v)
    assert names == "cudnn.SpatialCrossEntropyCriterion cudnn.VolumetricLogSoftMax"
    lsm = _log_softmax(x, 1)
    idx = target.astype(int) - 1
    picked = np.take_along_axis(lsm, idx[:, None], 1)[:, 0]
    assert loss == pytest.approx(-picked.mean(), rel=1e-12)
    onehot = np.zeros_like(x)
    np.put_along_axis(onehot, idx[:, None], 1, 1)
    np.testing.assert_allclose(grad, (np.exp(lsm) - onehot) / idx.size, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(vy, _log_softmax(v, 1), rtol=1e-10, atol=1e-12)


NEW_CLASSES = [
    "cudnn.SpatialConvolution(4, 6, 3, 3, 1, 1, 1, 1, 2)", "cudnn.SpatialFullConvolution(2, 3, 3, 3, 2, 2)",
    "cudnn.VolumetricConvolution(2, 3, 2, 2, 2)", "cudnn.VolumetricFullConvolution(2, 3, 2, 2, 2)",
    "cudnn.TemporalConvolution(3, 2, 2, 1, 1)", "cudnn.SpatialMaxPooling(2, 2, 2, 2)",
    "cudnn.SpatialAveragePooling(3, 3, 1, 1, 1, 1)", "cudnn.VolumetricMaxPooling(2, 2, 2)",
    "cudnn.VolumetricAveragePooling(2, 2, 2, 1, 1, 1, 1, 1, 1)", "cudnn.ReLU(true)", "cudnn.Tanh()",
    "cudnn.Sigmoid()", "cudnn.ClippedReLU(0.5)", "cudnn.SoftMax()", "cudnn.LogSoftMax()",
    "cudnn.SpatialSoftMax()", "cudnn.SpatialLogSoftMax()", "cudnn.VolumetricSoftMax()",
    "cudnn.VolumetricLogSoftMax()", "cudnn.BatchNormalization(3)", "cudnn.SpatialBatchNormalization(4)",
    "cudnn.VolumetricBatchNormalization(2)", "cudnn.SpatialCrossMapLRN(3)", "cudnn.LSTM(3, 2, 2)",
    "cudnn.GRU(3, 2, 1)", "cudnn.BLSTM(3, 2, 1, true)", "cudnn.BGRU(3, 2, 2)", "cudnn.RNNTanh(3, 2, 1)",
    "cudnn.RNNReLU(3, 2, 1)",
]

INPUT_SIZES = {"Spatial": (2, 4, 5, 5), "Volumetric": (1, 2, 4, 4, 4), "Temporal": (5, 3),
               "BatchNormalization(3)": (4, 3), "SpatialBatch": (2, 4, 3, 3), "VolumetricBatch": (2, 2, 2, 2, 2),
               "LSTM": (4, 2, 3), "GRU": (4, 2, 3), "RNN": (4, 2, 3), "B": (2, 4, 3)}


def _input_size(ctor: str) -> tuple:
    for key in ["BatchNormalization(3)", "SpatialBatch", "VolumetricBatch", "LSTM", "GRU", "RNN",
                "Spatial", "Volumetric", "Temporal"]:
        if key in ctor:
            sizes = INPUT_SIZES[key]
            if "Conv" in ctor and "Spatial" in ctor:
                return (2, 4 if "(4" in ctor else 2, 5, 5)
            return sizes
    return (2, 3, 4)


@pytest.mark.parametrize("ctor", NEW_CLASSES)
def test_serialization_round_trip(cudnn_lua, rng, ctor):
    """Each class through torch.serialize / deserialize keeps its class and computes the same."""
    x = rng.standard_normal(_input_size(ctor))
    name, back, y, y2 = cudnn_lua(f"""function(x)
      torch.manualSeed(5)
      local m = {ctor}:double()
      m:evaluate()
      local y = m:forward(x):clone()
      local m2 = torch.deserialize(torch.serialize(m))
      return torch.type(m), torch.type(m2), y, m2:forward(x):clone()
    end""")(x)
    assert back == name == ctor.split("(")[0]
    np.testing.assert_array_equal(y, y2)


# ---- the layers --------------------------------------------------------------------------------

def test_softmax_modes(cudnn_lua, rng):
    """cudnn.SoftMax normalizes a sample's values all together (cuDNN's instance mode),
    cudnn.SpatialSoftMax the planes at each position (channel mode), as cuDNN views 1D-4D."""
    x4, x3, x1 = rng.standard_normal((2, 3, 2, 2)), rng.standard_normal((3, 2, 2)), rng.standard_normal(4)
    s4, s3, p4, p3, p1, l4, g = cudnn_lua("""function(x4, x3, x1)
      local sm = cudnn.SoftMax()
      local s4 = sm:forward(x4):clone()
      local g = sm:backward(x4, torch.ones(x4:size()):cmul(x4)):clone()
      return s4, cudnn.SoftMax():forward(x3), cudnn.SpatialSoftMax():forward(x4),
        cudnn.SpatialSoftMax():forward(x3), cudnn.SpatialSoftMax():forward(x1), cudnn.LogSoftMax():forward(x4), g
    end""")(x4, x3, x1)

    def softmax(x: np.ndarray, axis) -> np.ndarray:
        return np.exp(_log_softmax(x, axis))
    np.testing.assert_allclose(s4, softmax(x4, (1, 2, 3)), rtol=1e-12)
    np.testing.assert_allclose(s3, softmax(x3, None), rtol=1e-12)
    np.testing.assert_allclose(p4, softmax(x4, 1), rtol=1e-12)
    np.testing.assert_allclose(p3, softmax(x3, 0), rtol=1e-12)
    np.testing.assert_allclose(p1, softmax(x1, 0), rtol=1e-12)
    np.testing.assert_allclose(l4, _log_softmax(x4, (1, 2, 3)), rtol=1e-12)
    y = softmax(x4, (1, 2, 3))   # gradient of sum(gy * y) with gy = x4: y * (gy - sum(gy * y))
    np.testing.assert_allclose(g, y * (x4 - (x4 * y).sum(axis=(1, 2, 3), keepdims=True)), rtol=1e-10, atol=1e-12)


def test_padded_temporal_convolution(cudnn_lua, rng):
    x, gy = rng.standard_normal((2, 4, 3)), rng.standard_normal((2, 5, 2))
    y, gx, w, b = cudnn_lua("""function(x, gy)
      local m = cudnn.TemporalConvolution(3, 2, 2, 1, 1):double()
      local y = m:forward(x):clone()
      return y, m:backward(x, gy), m.weight, m.bias
    end""")(x, gy)

    def conv() -> np.ndarray:
        xp = np.pad(x, ((0, 0), (1, 1), (0, 0)))
        return np.stack([[w @ xp[n, t:t + 2].reshape(-1) + b for t in range(5)] for n in range(2)])
    np.testing.assert_allclose(y, conv(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(gx, numeric_grad(lambda: float((conv() * gy).sum()), x), rtol=1e-6, atol=1e-8)


def test_cudnn_torch_padded_temporal_convolution_file(cudnn_lua, rng, tmp_path):
    """cudnn.torch saves its TemporalConvolution as a one-plane spatial convolution (kH, dH, padH
    over time); with cudnn loaded it reads as cudnn.TemporalConvolution, padding kept."""
    frame, out, k = 3, 2, 3
    w, b = rng.standard_normal((out, k * frame)), rng.standard_normal(out)
    fields = {"inputFrameSize": frame, "outputFrameSize": out, "nInputPlane": 1, "nOutputPlane": out,
              "kW": frame, "kH": k, "dW": 1, "dH": 2, "padW": 0, "padH": 1, "groups": 1, "weight": w, "bias": b,
              "gradWeight": np.zeros_like(w), "gradBias": np.zeros(out), "output": np.zeros(0),
              "gradInput": np.zeros(0), "train": True}
    t7.write(tmp_path / "t.t7", t7.TorchObject("cudnn.TemporalConvolution", 1, fields))
    x = rng.standard_normal((6, frame))
    name, y = cudnn_lua("""function(p, x)
      local m = torch.load(p)
      return torch.type(m), m:forward(x)
    end""")(str(tmp_path / "t.t7"), x)
    xp = np.pad(x, ((1, 1), (0, 0)))
    assert name == "cudnn.TemporalConvolution"
    np.testing.assert_allclose(y, np.stack([w @ xp[t:t + k].reshape(-1) + b for t in range(0, 6, 2)]),
                               rtol=1e-10, atol=1e-12)


def test_criterion_shape_errors(cudnn_lua):
    err = cudnn_lua("""function()
      local s = cudnn.SpatialCrossEntropyCriterion()
      local v = cudnn.VolumetricCrossEntropyCriterion()
      local _, e1 = pcall(s.forward, s, torch.randn(2, 3, 4, 4), torch.ones(2, 4, 5))
      local _, e2 = pcall(v.forward, v, torch.randn(2, 3, 4, 4), torch.ones(2, 4, 4))
      return tostring(e1) .. '\\n' .. tostring(e2)
    end""")()
    e1, e2 = err.split("\n")
    assert ("cudnn.SpatialCrossEntropyCriterion: expected a batch x classes x H x W input and a batch x H x W "
            "target, got 2x3x4x4 and 2x4x5") in e1
    assert "cudnn.VolumetricCrossEntropyCriterion: expected a batch x classes x T x H x W input" in e2


def test_clipped_relu_and_volumetric_average_padding(cudnn_lua, rng):
    x = rng.standard_normal((1, 2, 3, 3, 3))
    c, v = cudnn_lua("""function(x)
      return cudnn.ClippedReLU(0.3):forward(x):clone(), cudnn.VolumetricAveragePooling(2, 2, 2, 2, 2, 2, 1, 1, 1):forward(x)
    end""")(x)
    np.testing.assert_allclose(c, np.clip(x, 0, 0.3), rtol=1e-12)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1), (1, 1)))
    want = xp[:, :, :4, :4, :4].reshape(1, 2, 2, 2, 2, 2, 2, 2).mean(axis=(3, 5, 7))
    np.testing.assert_allclose(v, want, rtol=1e-12)   # cuDNN's average counts the padding


# ---- cudnn.convert ---------------------------------------------------------------------------

def test_convert_both_ways(cudnn_lua, rng):
    """nn -> cudnn -> nn: the listed layers change class, share their parameters and compute the
    same; excluded and unlisted modules stay; SpatialConvolutionMM becomes a SpatialConvolution."""
    x = rng.standard_normal((2, 3, 8, 8))
    got = cudnn_lua("""function(x)
      torch.manualSeed(2)
      local net = nn.Sequential()
        :add(nn.SpatialConvolution(3, 4, 3, 3)):add(nn.SpatialBatchNormalization(4)):add(nn.ReLU())
        :add(nn.SpatialMaxPooling(2, 2)):add(nn.SpatialConvolutionMM(4, 2, 1, 1)):add(nn.Tanh())
        :add(nn.View(18):setNumInputDims(3)):add(nn.Linear(18, 5)):add(nn.LogSoftMax())
      net:evaluate()
      local w = net.modules[1].weight
      local y = net:forward(x):clone()
      cudnn.convert(net, cudnn, function(m) return torch.type(m) == 'nn.Tanh' end)
      local types = {}
      for _, m in ipairs(net.modules) do types[#types + 1] = torch.type(m) end
      local same = tostring(net.modules[1].weight == w)
      local y2 = torch.deserialize(torch.serialize(net)):forward(x):clone()   -- converted ones save and load
      cudnn.convert(net, nn)
      for _, m in ipairs(net.modules) do types[#types + 1] = torch.type(m) end
      return table.concat(types, ' '), same, y, y2, net:forward(x)
    end""")(x)
    types, same, y, y2, y3 = got
    assert types.split() == [
        "cudnn.SpatialConvolution", "cudnn.SpatialBatchNormalization", "cudnn.ReLU", "cudnn.SpatialMaxPooling",
        "cudnn.SpatialConvolution", "nn.Tanh", "nn.View", "nn.Linear", "cudnn.LogSoftMax",
        "nn.SpatialConvolution", "nn.SpatialBatchNormalization", "nn.ReLU", "nn.SpatialMaxPooling",
        "nn.SpatialConvolution", "nn.Tanh", "nn.View", "nn.Linear", "nn.LogSoftMax"]
    assert same == "true"
    np.testing.assert_allclose(y2, y, rtol=1e-12)
    np.testing.assert_allclose(y3, y, rtol=1e-12)


def test_convert_refuses_groups(cudnn_lua):
    err = cudnn_lua("""function()
      local ok, e = pcall(cudnn.convert, nn.Sequential():add(cudnn.SpatialConvolution(4, 4, 1, 1, 1, 1, 0, 0, 2)), nn)
      return tostring(e)
    end""")()
    assert "cudnn.convert: cudnn.SpatialConvolution with 2 groups has no nn counterpart" in err


def test_pooling_steps_by_the_kernel_by_default(cudnn_lua, rng):
    """cudnn.torch's pooling defaults its stride to the kernel size (nn's average pooling to 1)."""
    x = rng.standard_normal((2, 3, 6, 6))
    avg, mx, *strides = cudnn_lua("""function(x)
      local a, m = cudnn.SpatialAveragePooling(2, 2), cudnn.SpatialMaxPooling(3, 3)
      return a:forward(x):clone(), m:forward(x):clone(), a.dW, a.dH, m.dW, m.dH
    end""")(x)
    assert strides == [2, 2, 3, 3]
    np.testing.assert_allclose(avg, x.reshape(2, 3, 3, 2, 3, 2).mean(axis=(3, 5)), rtol=1e-12)
    np.testing.assert_allclose(mx, x.reshape(2, 3, 2, 3, 2, 3).max(axis=(3, 5)), rtol=0)
    v = rng.standard_normal((1, 2, 4, 8, 6))   # cudnn.torch's _Pooling3D: dT, dW, dH = kT, kW, kH
    vavg, vmax, *strides = cudnn_lua("""function(v)
      local a, m = cudnn.VolumetricAveragePooling(2, 3, 4), cudnn.VolumetricMaxPooling(2, 3, 4)
      return a:forward(v):clone(), m:forward(v):clone(), a.dT, a.dW, a.dH, m.dT, m.dW, m.dH
    end""")(v)
    assert strides == [2, 3, 4, 2, 3, 4]
    blocks = v.reshape(1, 2, 2, 2, 2, 4, 2, 3)   # time, height, width cut by kT = 2, kH = 4, kW = 3
    np.testing.assert_allclose(vavg, blocks.mean(axis=(3, 5, 7)), rtol=1e-12)
    np.testing.assert_allclose(vmax, blocks.max(axis=(3, 5, 7)), rtol=0)
