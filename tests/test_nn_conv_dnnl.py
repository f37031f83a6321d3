"""The convolutions' two CPU paths, oneDNN (where installed) and im2col + BLAS, each against
direct numpy float64 loops: nn.SpatialConvolution (forward, gradInput, gradWeight, gradBias)
and nn.SpatialFullConvolution; oneDNN's thread count follows torch.setnumthreads; and, where
installed, PyTorch's own conv2d / conv_transpose2d."""
import numpy as np
import pytest

from helpers import N, lua_fn

try:
    import torch as pytorch
    import torch.nn.functional as F
except ImportError:  # optional reference
    pytorch, F = None, None

available = lua_fn("function() return require('torch.backend.cpu.dnnl').available end")
PATHS = ["im2col", pytest.param("onednn", marks=pytest.mark.skipif(
    not available(), reason="oneDNN is not installed (pip install 'luabridge[onednn]')"))]

# Runs a module nn[cls](...) (Float) on the path named `path`: returns output, gradInput,
# gradWeight, gradBias (accumulated with scale 0.5 onto gradients of 1).
run = lua_fn("""function(path, cls, w, b, x, go, ...)
  require 'nn'
  local dnnl = require 'torch.backend.cpu.dnnl'
  local channels = require('torch.backend.cpu.nn_conv').dnnlChannels
  local was, one, grad = dnnl.enabled, channels.oneThread, channels.gradInput
  dnnl.enabled = path == 'onednn'
  channels.oneThread, channels.gradInput = 0, 0   -- oneDNN for these few channels too
  local args = { ... }
  local ok, a, c, d, e = pcall(function()
    local m = nn[cls](unpack(args)):float()
    m.weight:copy(w); m.bias:copy(b)
    m.gradWeight:fill(1); m.gradBias:fill(1)
    local out = m:forward(x):clone()
    local gi = m:updateGradInput(x, go):clone()
    m:accGradParameters(x, go, 0.5)
    return out, gi, m.gradWeight, m.gradBias
  end)
  dnnl.enabled, channels.oneThread, channels.gradInput = was, one, grad
  if not ok then error(a) end
  return a, c, d, e
end""")


def conv_ref(x, w, b, d, p, go):
    """out = b + sum w * patches; gradInput, gradWeight, gradBias of sum(out * go): loops over
    the kernel taps in float64 (d, p: strides and paddings, (H, W) order)."""
    n, c, H, W = x.shape
    o, _, kH, kW = w.shape
    xp = np.pad(x, [(0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])])
    oH, oW = (H + 2 * p[0] - kH) // d[0] + 1, (W + 2 * p[1] - kW) // d[1] + 1
    out = np.zeros((n, o, oH, oW)) + b[None, :, None, None]
    gxp, gw = np.zeros_like(xp), np.zeros_like(w)
    for i in range(kH):
        for j in range(kW):
            win = (slice(None), slice(None), slice(i, i + d[0] * (oH - 1) + 1, d[0]),
                   slice(j, j + d[1] * (oW - 1) + 1, d[1]))
            out += np.einsum("nchw,oc->nohw", xp[win], w[:, :, i, j])
            gw[:, :, i, j] = np.einsum("nohw,nchw->oc", go, xp[win])
            gxp[win] += np.einsum("nohw,oc->nchw", go, w[:, :, i, j])
    gx = gxp[:, :, p[0]:p[0] + H, p[1]:p[1] + W]
    return out, gx, gw, go.sum(axis=(0, 2, 3))


CONV_CASES = [  # nIn, nOut, k (H, W), stride, pad, H, W, batch
    (3, 8, (3, 3), (1, 1), (1, 1), 10, 9, 2),
    (4, 6, (5, 3), (2, 1), (2, 1), 13, 8, 3),
    (16, 24, (1, 1), (2, 2), (0, 0), 9, 9, 2),
    (2, 5, (3, 3), (2, 2), (0, 0), 8, 8, 1),     # the last row and column are read by no window
    (3, 4, (7, 7), (2, 2), (3, 3), 16, 16, 2),   # ResNet's first layer, small
]


def close(got, want, names):
    for name, g, r in zip(names, got, want):
        np.testing.assert_allclose(N(g), r, rtol=1e-4, atol=1e-4 * max(1.0, np.abs(r).max()), err_msg=name)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("case", CONV_CASES)
def test_conv_against_numpy(path, case):
    nIn, nOut, k, d, p, H, W, B = case
    rng = np.random.default_rng(nIn * nOut)
    oH, oW = (H + 2 * p[0] - k[0]) // d[0] + 1, (W + 2 * p[1] - k[1]) // d[1] + 1
    x = rng.standard_normal((B, nIn, H, W)).astype(np.float32)
    w = (rng.standard_normal((nOut, nIn) + k) * 0.3).astype(np.float32)
    b = rng.standard_normal(nOut).astype(np.float32)
    go = rng.standard_normal((B, nOut, oH, oW)).astype(np.float32)
    out, gx, gw, gb = conv_ref(*(a.astype(np.float64) for a in (x, w, b)), d, p, go.astype(np.float64))
    got = run(path, "SpatialConvolution", w, b, x, go, nIn, nOut, k[1], k[0], d[1], d[0], p[1], p[0])
    close(got, (out, gx, 1 + 0.5 * gw, 1 + 0.5 * gb), ("output", "gradInput", "gradWeight", "gradBias"))
    if pytorch is not None:   # PyTorch's own CPU convolution, in float64
        t = pytorch.from_numpy
        ref = F.conv2d(t(x).double(), t(w).double(), t(b).double(), stride=d, padding=p)
        np.testing.assert_allclose(N(got[0]), ref.numpy(), rtol=1e-4, atol=1e-4 * max(1.0, np.abs(out).max()))


FULL_CASES = [  # nIn, nOut, k, stride, pad, adj, H, W, batch
    (8, 4, 4, 2, 1, 0, 5, 4, 2),    # DCGAN's up-sampling layers, small
    (3, 5, 3, 1, 1, 0, 6, 6, 1),
    (4, 3, 5, 3, 2, 1, 4, 3, 2),
    (6, 2, 3, 2, 0, 1, 5, 5, 3),    # adj > pad: the last output row and column take no window
]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("case", FULL_CASES)
def test_full_conv_against_numpy(path, case):
    """A full convolution is the transpose of a convolution whose image is its output (padded
    by adj at the end): its output is that convolution's gradInput, its gradInput that
    convolution's output, its gradWeight that convolution's gradWeight with the roles of
    input and gradOutput swapped."""
    nIn, nOut, k, s, p, adj, H, W, B = case
    rng = np.random.default_rng(nIn * nOut + adj)
    oH, oW = (H - 1) * s - 2 * p + k + adj, (W - 1) * s - 2 * p + k + adj
    x = rng.standard_normal((B, nIn, H, W)).astype(np.float32)
    w = (rng.standard_normal((nIn, nOut, k, k)) * 0.3).astype(np.float32)
    b = rng.standard_normal(nOut).astype(np.float32)
    go = rng.standard_normal((B, nOut, oH, oW)).astype(np.float32)
    x64, w64, go64 = (a.astype(np.float64) for a in (x, w, go))
    gi, out, gw, _ = conv_ref(go64, w64, np.zeros(nIn), (s, s), (p, p), x64)
    got = run(path, "SpatialFullConvolution", w, b, x, go, nIn, nOut, k, k, s, s, p, p, adj, adj)
    close(got, (out + b[:, None, None], gi, 1 + 0.5 * gw, 1 + 0.5 * go64.sum(axis=(0, 2, 3))),
          ("output", "gradInput", "gradWeight", "gradBias"))
    if pytorch is not None:
        t = pytorch.from_numpy
        ref = F.conv_transpose2d(t(x).double(), t(w).double(), t(b).double(), stride=s, padding=p, output_padding=adj)
        np.testing.assert_allclose(N(got[0]), ref.numpy(), rtol=1e-4, atol=1e-4 * max(1.0, np.abs(ref.numpy()).max()))


threads_seen = lua_fn("""function(n)
  require 'nn'
  local ffi = require 'ffi'
  local blas = require 'torch.backend.cpu.blas'
  local before, watch = torch.getnumthreads(), blas.watchLoad
  torch.setnumthreads(n)
  blas.watchLoad = false   -- all of them, however busy the machine is
  local m = nn.SpatialConvolution(2, 3, 3, 3):float()
  m:forward(torch.FloatTensor(1, 2, 6, 6):uniform())
  local seen = ffi.load('libgomp.so.1').omp_get_max_threads()
  torch.setnumthreads(before)
  blas.watchLoad = watch
  return seen, torch.getnumthreads()
end""")


@pytest.mark.skipif(not available(), reason="oneDNN is not installed (pip install 'luabridge[onednn]')")
@pytest.mark.parametrize("n", [1, 2, 3])
def test_onednn_runs_on_setnumthreads_threads(n):
    seen, _ = threads_seen(n)
    assert seen == n


# Batch normalization (Float) on the path named `path`, training or not: output, gradInput,
# gradWeight, gradBias (accumulated with scale 0.5 onto gradients of 1), running_mean, running_var.
run_bn = lua_fn("""function(path, cls, train, affine, x, go, w, b, rm, rv)
  require 'nn'
  local dnnl = require 'torch.backend.cpu.dnnl'
  local was = dnnl.enabled
  dnnl.enabled = path == 'onednn'
  local blas = require 'torch.backend.cpu.blas'
  local threads, watch = torch.getnumthreads(), blas.watchLoad
  torch.setnumthreads(2)   -- oneDNN's forward serves 2 threads or more
  blas.watchLoad = false   -- however busy the machine is
  local ok, r = pcall(function()
    local m = nn[cls](x:size(2), 1e-5, 0.1, affine):float()
    if affine then m.weight:copy(w); m.bias:copy(b); m.gradWeight:fill(1); m.gradBias:fill(1) end
    m.running_mean:copy(rm); m.running_var:copy(rv)
    if not train then m:evaluate() end
    local out = m:forward(x):clone()
    local gi = m:backward(x, go, 0.5):clone()
    return { out, gi, m.gradWeight or false, m.gradBias or false, m.running_mean, m.running_var }
  end)
  dnnl.enabled, blas.watchLoad = was, watch
  torch.setnumthreads(threads)
  if not ok then error(r) end
  return unpack(r)
end""")


def bn_ref(x, go, w, b, rm, rv, train, eps=1e-5, momentum=0.1):
    """torch7's batch normalization over dim 1 in float64: output, gradInput, the parameter
    gradients, and the running statistics after the step (unbiased variance)."""
    axes = (0,) + tuple(range(2, x.ndim))
    shape = [1, -1] + [1] * (x.ndim - 2)
    n = x.size // x.shape[1]
    if train:
        mean, var = x.mean(axis=axes), x.var(axis=axes)
        rm, rv = momentum * mean + (1 - momentum) * rm, momentum * var * n / (n - 1) + (1 - momentum) * rv
    else:
        mean, var = rm, rv
    invstd = 1 / np.sqrt(var + eps)
    xhat = (x - mean.reshape(shape)) * invstd.reshape(shape)
    out = xhat * w.reshape(shape) + b.reshape(shape)
    gw, gb = (go * xhat).sum(axis=axes), go.sum(axis=axes)
    if train:
        gi = (go - (gb / n).reshape(shape) - xhat * (gw / n).reshape(shape)) * (invstd * w).reshape(shape)
    else:
        gi = go * (invstd * w).reshape(shape)
    return out, gi, gw, gb, rm, rv


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("train", [True, False])
@pytest.mark.parametrize("cls, shape, affine", [
    ("SpatialBatchNormalization", (4, 3, 5, 6), True),
    ("SpatialBatchNormalization", (2, 16, 7, 7), False),
    ("BatchNormalization", (8, 5), True),
])
def test_batchnorm_against_numpy(path, train, cls, shape, affine):
    rng = np.random.default_rng(shape[1])
    C = shape[1]
    x = (rng.standard_normal(shape) * 2 + 1).astype(np.float32)
    go = rng.standard_normal(shape).astype(np.float32)
    w = rng.uniform(0.5, 1.5, C).astype(np.float32) if affine else np.ones(C, np.float32)
    b = rng.standard_normal(C).astype(np.float32) if affine else np.zeros(C, np.float32)
    rm, rv = rng.standard_normal(C).astype(np.float32), rng.uniform(0.5, 2, C).astype(np.float32)
    got = run_bn(path, cls, train, affine, x, go, w, b, rm, rv)
    want = bn_ref(*(a.astype(np.float64) for a in (x, go, w, b, rm, rv)), train)
    names = ("output", "gradInput", "gradWeight", "gradBias", "running_mean", "running_var")
    for name, g, r in zip(names, got, want):
        if name.startswith("grad") and name != "gradInput":
            if not affine:
                continue
            r = 1 + 0.5 * r
        np.testing.assert_allclose(N(g), r, rtol=1e-4, atol=1e-4 * max(1.0, np.abs(r).max()), err_msg=name)


# Max pooling (Float) on the path named `path`: output, indices, gradInput.
run_pool = lua_fn("""function(path, cls, ceil, x, go, ...)
  require 'nn'
  local dnnl = require 'torch.backend.cpu.dnnl'
  local was = dnnl.enabled
  dnnl.enabled = path == 'onednn'
  local args = { ... }
  local ok, r = pcall(function()
    local m = nn[cls](unpack(args)):float()
    if ceil then m:ceil() end
    local out = m:forward(x):clone()
    return { out, m.indices:clone(), m:backward(x, go):clone() }
  end)
  dnnl.enabled = was
  if not ok then error(r) end
  return unpack(r)
end""")


def max_pool_ref(x, k, d, pad, dil, oH, oW):
    """Max of each window (padding excluded) and the 1-based plane offset of its first maximum."""
    B, C, H, W = x.shape
    out, idx = np.zeros((B, C, oH, oW)), np.zeros((B, C, oH, oW), np.int64)
    for oy in range(oH):
        for ox in range(oW):
            taps = [(oy * d[0] - pad[0] + i * dil[0], ox * d[1] - pad[1] + j * dil[1])
                    for i in range(k[0]) for j in range(k[1])]
            taps = [(y, xx) for y, xx in taps if 0 <= y < H and 0 <= xx < W]
            vals = np.stack([x[:, :, y, xx] for y, xx in taps], axis=-1)
            first = vals.argmax(axis=-1)   # numpy keeps the first maximum too
            out[:, :, oy, ox] = vals.max(axis=-1)
            offs = np.array([y * W + xx + 1 for y, xx in taps])
            idx[:, :, oy, ox] = offs[first]
    return out, idx


POOL_CASES = [  # class, constructor arguments (kW, kH, dW, dH, padW, padH[, dilW, dilH]), ceil, input shape
    ("SpatialMaxPooling", (3, 3, 2, 2, 1, 1), False, (2, 4, 12, 11)),   # ResNet's, small
    ("SpatialMaxPooling", (2, 2, 2, 2, 0, 0), False, (3, 2, 8, 8)),
    ("SpatialMaxPooling", (2, 2, 2, 2, 0, 0), True, (1, 3, 7, 9)),     # ceil: the last windows hang over
    ("SpatialMaxPooling", (3, 2, 1, 2, 1, 0), False, (2, 2, 5, 6)),
    ("SpatialDilatedMaxPooling", (3, 3, 1, 1, 1, 1, 2, 2), False, (1, 2, 9, 8)),
]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("case", POOL_CASES)
def test_max_pool_against_numpy(path, case):
    cls, args, ceil, shape = case
    kW, kH, dW, dH, pW, pH = args[:6]
    lW, lH = args[6:] if len(args) > 6 else (1, 1)
    rng = np.random.default_rng(sum(shape))
    # rounded values after a ReLU: ties within windows, zeros among them
    x = np.maximum(np.round(rng.standard_normal(shape) * 2), 0).astype(np.float32)
    rnd = np.ceil if ceil else np.floor
    H, W = shape[2:]
    oH = int(rnd((H + 2 * pH - lH * (kH - 1) - 1) / dH)) + 1
    oW = int(rnd((W + 2 * pW - lW * (kW - 1) - 1) / dW)) + 1
    oH -= (oH - 1) * dH >= H + pH
    oW -= (oW - 1) * dW >= W + pW
    go = rng.standard_normal((shape[0], shape[1], oH, oW)).astype(np.float32)
    out, idx = max_pool_ref(x.astype(np.float64), (kH, kW), (dH, dW), (pH, pW), (lH, lW), oH, oW)
    got_out, got_idx, got_gi = run_pool(path, cls, ceil, x, go, *args)
    np.testing.assert_array_equal(N(got_out), out)
    np.testing.assert_array_equal(N(got_idx), idx)
    gi = np.zeros(x.shape).reshape(shape[0], shape[1], -1)
    for b in range(shape[0]):
        for c in range(shape[1]):
            np.add.at(gi[b, c], idx[b, c].ravel() - 1, go[b, c].ravel())
    np.testing.assert_allclose(N(got_gi), gi.reshape(x.shape), rtol=1e-6, atol=1e-6)
