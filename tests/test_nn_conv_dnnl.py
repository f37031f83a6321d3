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
  local was = dnnl.enabled
  dnnl.enabled = path == 'onednn'
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
  dnnl.enabled = was
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
    (6, 2, 3, 2, 0, 1, 5, 5, 3),    # adj > pad: the im2col path serves it on either setting
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
  local before = torch.getnumthreads()
  torch.setnumthreads(n)
  local m = nn.SpatialConvolution(2, 3, 3, 3):float()
  m:forward(torch.FloatTensor(1, 2, 6, 6):uniform())
  local seen = ffi.load('libgomp.so.1').omp_get_max_threads()
  torch.setnumthreads(before)
  return seen, torch.getnumthreads()
end""")


@pytest.mark.skipif(not available(), reason="oneDNN is not installed (pip install 'luabridge[onednn]')")
@pytest.mark.parametrize("n", [1, 2, 3])
def test_onednn_runs_on_setnumthreads_threads(n):
    seen, _ = threads_seen(n)
    assert seen == n
