"""lua/inn: imagine-nn's layers (ROIPooling, SpatialPyramidPooling, SpatialSameResponseNormalization,
ConstAffine, MeanSubtraction, the ceil-mode poolings) and inn.utils' batch-norm surgery. Expected
values are numpy's, written from imagine-nn's CUDA kernels and Lua sources (float64 here)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from helpers import N, T, assert_lua_errors, lua_fn, numeric_grad

roi_forward = lua_fn("""function(x, rois, W, H, scale, v2)
  require 'inn'
  local m = inn.ROIPooling(W, H, scale)
  m.v2 = v2
  local y = m:forward({x, rois}):clone()
  return y, m.indices:clone()
end""")

roi_backward = lua_fn("""function(x, rois, go, W, H, scale, v2)
  require 'inn'
  local m = inn.ROIPooling(W, H, scale)
  m.v2 = v2
  m:forward({x, rois})
  local g = m:backward({x, rois}, go)
  return g[1]:clone(), g[2]:clone()
end""")


def c_round(v: float) -> int:
    return int(math.floor(v + 0.5)) if v >= 0 else int(math.ceil(v - 0.5))


def roi_pool_reference(x, rois, W, H, scale, v2):
    """imagine-nn's ROIPoolForward(V2) kernel, element by element."""
    R, C, height, width = rois.shape[0], x.shape[1], x.shape[2], x.shape[3]
    out = np.zeros((R, C, H, W))
    arg = -np.ones((R, C, H, W), dtype=np.int64)
    for r in range(R):
        b = int(rois[r, 0]) - 1
        sw, sh = c_round((rois[r, 1] - 1) * scale), c_round((rois[r, 2] - 1) * scale)
        ew, eh = c_round((rois[r, 3] - 1) * scale), c_round((rois[r, 4] - 1) * scale)
        if v2:
            ew, eh = ew - 1, eh - 1
        rw, rh = max(ew - sw + 1, 1), max(eh - sh + 1, 1)
        bh, bw = rh / H, rw / W
        lo, hi = (c_round, c_round) if v2 else (math.floor, math.ceil)
        for c in range(C):
            for ph in range(H):
                for pw in range(W):
                    hs = min(max(int(lo(ph * bh)) + sh, 0), height)
                    he = min(max(int(hi((ph + 1) * bh)) + sh, 0), height)
                    ws = min(max(int(lo(pw * bw)) + sw, 0), width)
                    we = min(max(int(hi((pw + 1) * bw)) + sw, 0), width)
                    if he <= hs or we <= ws:
                        continue
                    best, at = -np.inf, -1
                    for h in range(hs, he):
                        for w in range(ws, we):
                            if x[b, c, h, w] > best:
                                best, at = x[b, c, h, w], h * width + w
                    out[r, c, ph, pw], arg[r, c, ph, pw] = best, at
    return out, arg


ROIS = np.array([[1, 1, 1, 24, 16], [2, 3, 5, 20, 9], [1, 9, 2, 9, 2], [2, 30, 30, 40, 40], [1, 5.5, 2.5, 17.5, 13.5]])


@pytest.mark.parametrize("v2", [True, False])
@pytest.mark.parametrize("W,H,scale", [(2, 2, 0.5), (3, 2, 1 / 2), (4, 3, 0.25), (2, 2, 1.0)])
def test_roi_pooling_forward(rng, v2, W, H, scale):
    x = rng.standard_normal((2, 3, 9, 12))
    y, idx = roi_forward(T(x), T(ROIS.copy()), W, H, scale, v2)
    want, arg = roi_pool_reference(x, ROIS, W, H, scale, v2)
    np.testing.assert_array_equal(N(y), want)
    np.testing.assert_array_equal(N(idx), arg)


@pytest.mark.parametrize("v2", [True, False])
def test_roi_pooling_backward_matches_numeric_gradient(rng, v2):
    # distinct values: the maxima are unique, so the pooling is differentiable there
    x = rng.permutation(2 * 2 * 8 * 10).reshape(2, 2, 8, 10).astype(np.float64) / 7.0
    go = rng.standard_normal((len(ROIS), 2, 3, 2))
    gx, grois = roi_backward(T(x), T(ROIS.copy()), T(go), 2, 3, 0.5, v2)

    def loss() -> float:
        out, _ = roi_pool_reference(x, ROIS, 2, 3, 0.5, v2)
        return float((out * go).sum())

    np.testing.assert_allclose(N(gx), numeric_grad(loss, x, eps=1e-4), atol=1e-8)
    np.testing.assert_array_equal(N(grois), np.zeros_like(ROIS))


def test_roi_pooling_float_and_errors():
    got = lua_fn("""function()
      require 'inn'
      local m = inn.ROIPooling(7, 7, 1/16)
      local y = m:forward({torch.FloatTensor(1, 4, 14, 14):fill(2), torch.FloatTensor{{1, 1, 1, 224, 224}}})
      return torch.type(y), y:size(1), y:size(2), y:size(3), y:min(), tostring(m)
    end""")()
    assert got == ("torch.FloatTensor", 1, 4, 7, 2.0, "inn.ROIPooling(7, 7, 0.0625)")
    assert_lua_errors([
        ("function() require 'inn'; inn.ROIPooling(2, 2):forward(torch.randn(1, 2, 4, 4)) end",
         r"inn\.ROIPooling: the input is a table \{data, rois\}"),
        ("function() require 'inn'; inn.ROIPooling(2, 2):forward({torch.randn(2, 4, 4), torch.Tensor{{1, 1, 1, 2, 2}}}) end",
         r"inn\.ROIPooling: data must be 4-D .* got size 2x4x4"),
        ("function() require 'inn'; inn.ROIPooling(2, 2):forward({torch.randn(1, 2, 4, 4), torch.Tensor{{1, 1, 2, 2}}}) end",
         r"inn\.ROIPooling: rois must be R x 5 .* got size 1x4"),
        ("function() require 'inn'; inn.ROIPooling(2, 2):forward({torch.randn(1, 2, 4, 4), torch.Tensor{{3, 1, 1, 2, 2}}}) end",
         r"inn\.ROIPooling: a roi names image 3, the data has 1"),
    ])


def adaptive_max(x, w, h):
    n, c, H, W = x.shape
    out = np.zeros((n, c, h, w))
    for i in range(h):
        for j in range(w):
            r0, r1 = (i * H) // h, -((-(i + 1) * H) // h)
            c0, c1 = (j * W) // w, -((-(j + 1) * W) // w)
            out[:, :, i, j] = x[:, :, r0:r1, c0:c1].max(axis=(2, 3))
    return out


def test_spatial_pyramid_pooling(rng):
    x = rng.standard_normal((2, 3, 7, 9))
    f = lua_fn("""function(x, xs)
      require 'inn'
      local m = inn.SpatialPyramidPooling({{1, 1}, {2, 2}, {3, 2}})
      local y = m:forward(x):clone()
      local y1 = inn.SpatialPyramidPooling({1, 1}, {2, 2}, {3, 2}):forward(xs):clone()
      local g = m:backward(x, torch.ones(y:size())):clone()
      return y, y1, g
    end""")
    y, y1, g = f(T(x), T(x[0].copy()))
    want = np.concatenate([adaptive_max(x, 1, 1).reshape(2, -1), adaptive_max(x, 2, 2).reshape(2, -1),
                           adaptive_max(x, 3, 2).reshape(2, -1)], axis=1)
    np.testing.assert_allclose(N(y), want, rtol=1e-12)
    np.testing.assert_allclose(N(y1), want[0], rtol=1e-12)
    assert N(g).shape == x.shape and N(g).sum() == pytest.approx(want.size)


def test_same_response_normalization(rng):
    x = rng.standard_normal((2, 3, 5, 6))
    size, alpha, beta = 3, 0.3, 0.75
    f = lua_fn("""function(x, go)
      require 'inn'
      local m = inn.SpatialSameResponseNormalization(3, 0.3, 0.75)
      local y = m:forward(x):clone()
      return y, m:backward(x, go):clone()
    end""")
    go = rng.standard_normal(x.shape)
    y, g = f(T(x), T(go))

    def forward(v):
        p = np.pad(v ** 2, ((0, 0), (0, 0), (1, 1), (1, 1)))
        avg = np.zeros_like(v)
        for i in range(v.shape[2]):
            for j in range(v.shape[3]):
                avg[:, :, i, j] = p[:, :, i:i + size, j:j + size].sum(axis=(2, 3)) / size ** 2
        return v / (1 + alpha * avg) ** beta

    np.testing.assert_allclose(N(y), forward(x), rtol=1e-12)
    np.testing.assert_allclose(N(g), numeric_grad(lambda: float((forward(x) * go).sum()), x), rtol=1e-6, atol=1e-8)


def test_const_affine_and_mean_subtraction(rng):
    x = rng.standard_normal((2, 4, 3, 3))
    a, b = rng.standard_normal(4), rng.standard_normal(4)
    mean = rng.standard_normal((4, 3, 3))
    go = rng.standard_normal(x.shape)
    f = lua_fn("""function(x, a, b, mean, go)
      require 'inn'
      local m = inn.ConstAffine(4)
      m.a:copy(a); m.b:copy(b)
      local y = m:forward(x):clone()
      local g = m:backward(x, go):clone()
      local p = m:parameters()
      local s = inn.MeanSubtraction(mean)
      return y, g, p == nil or #p == 0, s:forward(x):clone(), s:backward(x, go):clone()
    end""")
    y, g, noparams, ys, gs = f(T(x), T(a), T(b), T(mean), T(go))
    np.testing.assert_allclose(N(y), x * a[None, :, None, None] + b[None, :, None, None], rtol=1e-12)
    np.testing.assert_allclose(N(g), go * a[None, :, None, None], rtol=1e-12)
    assert noparams
    np.testing.assert_allclose(N(ys), x - mean[None], rtol=1e-12)
    np.testing.assert_allclose(N(gs), go, rtol=1e-12)
    assert_lua_errors([
        ("function() require 'inn'; inn.ConstAffine(4):forward(torch.randn(2, 3, 2, 2)) end",
         r"inn\.ConstAffine: the input has 3 features \(size 2x3x2x2\), the module 4"),
        ("function() require 'inn'; inn.ConstAffine(4):forward(torch.randn(4, 2, 2)) end",
         r"inn\.ConstAffine: a 2-D or 4-D input expected, got 3-D"),
    ])


def test_ceil_mode_poolings(rng):
    x = rng.standard_normal((1, 2, 7, 7))
    f = lua_fn("""function(x)
      require 'inn'
      return inn.SpatialMaxPooling(3, 3, 2, 2):forward(x):clone(), inn.SpatialAveragePooling(2, 2, 2, 2):forward(x):clone(),
             torch.isTypeOf(inn.SpatialCrossResponseNormalization(5), 'nn.SpatialCrossMapLRN')
    end""")
    ymax, yavg, lrn = f(T(x))
    assert N(ymax).shape == (1, 2, 3, 3) and N(yavg).shape == (1, 2, 4, 4) and lrn
    np.testing.assert_allclose(N(ymax)[0, :, 2, 2], x[0, :, 4:7, 4:7].max(axis=(1, 2)))
    # ceil mode: the last window holds one cell, and THNN divides by the window clipped to the input (+ padding 0)
    np.testing.assert_allclose(N(yavg)[0, :, 3, 3], x[0, :, 6, 6])


def bn_eval(y, mean, var, eps, w, b):
    s = (y - mean[None, :, None, None]) / np.sqrt(var[None, :, None, None] + eps)
    return s * w[None, :, None, None] + b[None, :, None, None]


def test_fold_batch_norm_and_bn_to_fixed(rng):
    x = rng.standard_normal((2, 3, 6, 6))
    mean, var = rng.standard_normal(4), rng.uniform(0.5, 2, 4)
    w, b = rng.standard_normal(4), rng.standard_normal(4)
    f = lua_fn("""function(x, mean, var, w, b)
      require 'inn'
      local function net()
        local n = nn.Sequential():add(nn.SpatialConvolution(3, 4, 3, 3)):add(nn.SpatialBatchNormalization(4))
        torch.manualSeed(5)
        n:get(1):reset()
        n:get(2).running_mean:copy(mean); n:get(2).running_var:copy(var)
        n:get(2).weight:copy(w); n:get(2).bias:copy(b)
        n:evaluate()
        return n
      end
      local conv = net():get(1):forward(x):clone()
      local folded = inn.utils.foldBatchNorm(net())
      local fixed = inn.utils.BNtoFixed(net(), true)
      local n = net()
      local err = inn.utils.testSurgery(x, inn.utils.foldBatchNorm, n)
      return conv, folded:forward(x):clone(), #folded.modules, fixed:forward(x):clone(), torch.type(fixed:get(2)), err
    end""")
    conv, folded, nmods, fixed, kind, err = f(T(x), T(mean), T(var), T(w), T(b))
    want = bn_eval(N(conv), mean, var, 1e-5, w, b)
    np.testing.assert_allclose(N(folded), want, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(N(fixed), want, rtol=1e-10, atol=1e-12)
    assert nmods == 1 and kind == "inn.ConstAffine" and err < 1e-12
