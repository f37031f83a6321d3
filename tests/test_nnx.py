"""nnx (lua/nnx) against independent references: numpy bilinear/nearest/average resampling
written from nnx's documented formulas, direct loops for SpatialMatching and SoftMaxTree's path
sums, finite differences for the gradients, and the criterions' closed forms. The last test runs
nnx's own test/test-all.lua (fast classes) when a checkout of clementfarabet/lua---nnx is found."""
from __future__ import annotations

import itertools
import os
from pathlib import Path

import numpy as np
import pytest

import luabridge
from helpers import N, T, assert_lua_error, lua_fn, lua_value, numeric_grad, numpy_of

RNG = np.random.default_rng(7)


def rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape)


# module(ctor, input, gradOutput) -> output, gradInput (copies); ctor is a Lua expression.
run_module = lua_fn("""function(ctor, input, gradOutput)
  require 'nnx'
  local m = loadstring('return ' .. ctor)()
  local out = m:forward(input):clone()
  if gradOutput == nil then return out end
  return out, m:backward(input, gradOutput):clone()
end""")

jacobian_error = lua_fn("""function(ctor, input)
  require 'nnx'
  local m = loadstring('return ' .. ctor)()
  return nn.Jacobian.testJacobian(m, input)
end""")


def forward_backward(ctor: str, x: np.ndarray, g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    out, grad = run_module(ctor, T(x), T(g))
    return N(out), N(grad)


# ---------------------------------------------------------------------------- resampling

def bilinear_matrix(n_in: int, n_out: int) -> np.ndarray:
    """n_out x n_in weights of corner-aligned linear interpolation (out i reads in i*(n_in-1)/(n_out-1))."""
    m = np.zeros((n_out, n_in))
    ratio = (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    for i in range(n_out):
        pos = i * ratio
        lo = int(np.floor(pos))
        frac = pos - lo
        m[i, lo] += 1 - frac
        m[i, min(lo + 1, n_in - 1)] += frac
    return m


def bilinear(x: np.ndarray, oh: int, ow: int) -> np.ndarray:
    """The last two dims of x resampled: separable, rows then columns."""
    return bilinear_matrix(x.shape[-2], oh) @ x @ bilinear_matrix(x.shape[-1], ow).T


@pytest.mark.parametrize("shape, ctor, oh, ow", [
    ((2, 5, 4), "nn.SpatialReSampling{owidth=7, oheight=9}", 9, 7),
    ((3, 2, 8, 10), "nn.SpatialReSampling{rwidth=0.5, rheight=0.5}", 4, 5),
    ((1, 6, 6), "nn.SpatialReSampling{owidth=4, oheight=11}", 11, 4),
])
def test_resampling_is_bilinear_and_its_gradient_the_transpose(shape, ctor, oh, ow):
    x = rand(*shape)
    g = rand(*shape[:-2], oh, ow)
    out, grad = forward_backward(ctor, x, g)
    np.testing.assert_allclose(out, bilinear(x, oh, ow), atol=1e-12)
    mh, mw = bilinear_matrix(shape[-2], oh), bilinear_matrix(shape[-1], ow)
    np.testing.assert_allclose(grad, mh.T @ g @ mw, atol=1e-12)


def test_upsampling_repeats_pixels_and_sums_gradients():
    x, g = rand(2, 3, 4), rand(2, 9, 8)
    out, grad = forward_backward("nn.SpatialUpSampling(2, 3)", x, g)
    np.testing.assert_array_equal(out, x.repeat(3, axis=1).repeat(2, axis=2))
    np.testing.assert_allclose(grad, g.reshape(2, 3, 3, 4, 2).sum(axis=(2, 4)), atol=1e-12)


def test_upsampling_on_other_dims():
    x, g = rand(2, 3, 2, 5), rand(2, 3, 4, 5)
    out, grad = forward_backward("nn.SpatialUpSampling{dW=1, dH=2, yDim=3, xDim=4}", x, g)
    np.testing.assert_array_equal(out, x.repeat(2, axis=2))
    np.testing.assert_allclose(grad, g.reshape(2, 3, 2, 2, 5).sum(axis=3), atol=1e-12)


def test_downsampling_averages_whole_blocks():
    x, g = rand(2, 7, 8), rand(2, 2, 4)
    out, grad = forward_backward("nn.SpatialDownSampling(2, 3)", x, g)
    blocks = x[:, :6, :8].reshape(2, 2, 3, 4, 2)
    np.testing.assert_allclose(out, blocks.mean(axis=(2, 4)), atol=1e-12)
    want = np.zeros_like(x)
    want[:, :6, :8] = np.repeat(np.repeat(g, 3, axis=1), 2, axis=2) / 6
    np.testing.assert_allclose(grad, want, atol=1e-12)


def nearest_ex(x: np.ndarray, oh: int, ow: int) -> np.ndarray:
    """SpatialReSamplingEx's simple mode on dims 1, 2 of x (N x H x W x M)."""
    h, w = x.shape[1:3]
    if oh >= h:
        rows = np.arange(oh) // -(-oh // h)
        cols = np.arange(ow) // -(-ow // w)
    else:
        rows, cols = np.arange(oh) * (h // oh), np.arange(ow) * (w // ow)
    return x[:, rows][:, :, cols]


@pytest.mark.parametrize("mode, oh, ow", [
    ("simple", 7, 11), ("simple", 3, 2), ("average", 3, 2), ("average", 8, 9), ("bilinear", 7, 11), ("bilinear", 3, 4),
])
def test_resampling_ex_modes_on_dims_2_and_3_of_4(mode, oh, ow):
    x = rand(2, 6, 5, 3)
    out = N(run_module(f"nn.SpatialReSamplingEx{{owidth={ow}, oheight={oh}, yDim=2, xDim=3, mode='{mode}'}}", T(x)))
    if mode == "bilinear":
        want = np.einsum("yh,nhwm,xw->nyxm", bilinear_matrix(6, oh), x, bilinear_matrix(5, ow))
    elif mode == "average" and oh < 6:
        dh, dw = 6 // oh, 5 // ow
        want = x[:, :oh * dh, :ow * dw].reshape(2, oh, dh, ow, dw, 3).mean(axis=(2, 4))
    else:
        want = nearest_ex(x, oh, ow)
    np.testing.assert_allclose(out, want, atol=1e-12)
    assert jacobian_error(f"nn.SpatialReSamplingEx{{owidth={ow}, oheight={oh}, mode='{mode}'}}",
                          T(rand(3, 6, 5))) < 1e-6


@pytest.mark.parametrize("pads", [(1, 2, 3, 0), (-1, 2, 0, -2), (0, -3, -1, 1)])
def test_padding_pads_and_crops(pads):
    left, right, top, bottom = pads
    x, value = rand(2, 5, 6), 0.5
    out = N(run_module(f"nn.SpatialPadding({left}, {right}, {top}, {bottom}, nil, nil, {value})", T(x)))
    padded = np.pad(x, ((0, 0), (max(top, 0), max(bottom, 0)), (max(left, 0), max(right, 0))),
                    constant_values=value)
    want = padded[:, max(-top, 0):padded.shape[1] - max(-bottom, 0), max(-left, 0):padded.shape[2] - max(-right, 0)]
    np.testing.assert_array_equal(out, want)
    assert jacobian_error(f"nn.SpatialPadding({left}, {right}, {top}, {bottom})", T(x)) < 1e-6


def test_max_sampling_windows():
    x, g = rand(2, 7, 10), rand(2, 3, 4)
    out, grad = forward_backward("nn.SpatialMaxSampling{owidth=4, oheight=3}", x, g)
    want, want_grad = np.zeros((2, 3, 4)), np.zeros_like(x)
    for i in range(3):
        y0 = int(i * 7 / 3)
        y1 = max(y0 + 1, int((i + 1) * 7 / 3))
        for j in range(4):
            x0 = int(j * 10 / 4)
            x1 = max(x0 + 1, int((j + 1) * 10 / 4))
            for k in range(2):
                cell = x[k, y0:y1, x0:x1]
                want[k, i, j] = cell.max()
                dy, dx = np.unravel_index(cell.argmax(), cell.shape)
                want_grad[k, y0 + dy, x0 + dx] += g[k, i, j]
    np.testing.assert_array_equal(out, want)
    np.testing.assert_allclose(grad, want_grad, atol=1e-12)


@pytest.mark.parametrize("shape", [(2, 3, 4, 6), (3, 6, 4)])
def test_pixel_sort_is_space_to_depth(shape):
    x = rand(*shape)
    b = x.reshape(-1, *shape[-3:])
    n, c, h, w = b.shape
    want = b.reshape(n, c, h // 2, 2, w // 2, 2).transpose(0, 1, 3, 5, 2, 4).reshape(n, c * 4, h // 2, w // 2)
    want = want.reshape(*shape[:-3], c * 4, h // 2, w // 2)
    g = rand(*want.shape)
    out, grad = forward_backward("nn.PixelSort(2)", x, g)
    np.testing.assert_array_equal(out, want)
    # a permutation: the gradient is gradOutput permuted back
    back = g.reshape(n, c, 2, 2, h // 2, w // 2).transpose(0, 1, 4, 2, 5, 3).reshape(shape)
    np.testing.assert_array_equal(grad, back)


# ---------------------------------------------------------------------------- spatial linear maps

spatial_linear = lua_fn("""function(input, gradOutput)
  require 'nnx'
  local m = nn.SpatialLinear(input:size(1), gradOutput:size(1))
  m:zeroGradParameters()
  local out = m:forward(input):clone()
  local grad = m:backward(input, gradOutput, 0.5):clone()
  return m.weight, m.bias, out, grad, m.gradWeight, m.gradBias
end""")


def test_spatial_linear_is_a_linear_map_per_pixel():
    x, g = rand(3, 4, 5), rand(2, 4, 5)
    w, b, out, grad, gw, gb = map(N, spatial_linear(T(x), T(g)))
    np.testing.assert_allclose(out, np.einsum("oi,iyx->oyx", w, x) + b[:, None, None], atol=1e-12)
    np.testing.assert_allclose(grad, np.einsum("oi,oyx->iyx", w, g), atol=1e-12)
    np.testing.assert_allclose(gw, 0.5 * np.einsum("oyx,iyx->oi", g, x), atol=1e-12)
    np.testing.assert_allclose(gb, 0.5 * g.sum(axis=(1, 2)), atol=1e-12)


def test_spatial_linear_decay_shrinks_its_parameters():
    w, b, dw, db = map(N, lua_fn("""function()
      require 'nnx'
      local m = nn.SpatialLinear(3, 2)
      local w, b = m.weight:clone(), m.bias:clone()
      m:decayParameters(0.1)
      return w, b, m.weight, m.bias
    end""")())
    np.testing.assert_allclose(dw, 0.9 * w, atol=1e-15)
    np.testing.assert_allclose(db, 0.9 * b, atol=1e-15)


qd_linear = lua_fn("""function(inputs, gradOutputs, qd)
  require 'nnx'
  local m = nnx.QDRiemaNNLinear(inputs[1]:size(2), gradOutputs[1]:size(2), 0.3, qd)
  for i = 1, #inputs do
    m:zeroGradParameters()
    m:forward(inputs[i])
    m:backward(inputs[i], gradOutputs[i])
  end
  return m.gradWeight, m.gradBias
end""")


@pytest.mark.parametrize("qd", [True, False])
def test_qd_riemannian_linear_rescales_gradients_by_its_running_metric(qd):
    xs, gs = [rand(5, 3), rand(5, 3)], [rand(5, 2), rand(5, 2)]
    gw, gb = map(N, qd_linear(lua_value(xs), lua_value(gs), qd))
    mii = m0i = m00 = None
    for step, (x, g) in enumerate(zip(xs, gs)):
        stats = ((g ** 2).T @ x ** 2, (g ** 2).T @ x, (g ** 2).sum(axis=0))
        if step == 0:
            mii, m0i, m00 = stats
        else:
            mii, m0i, m00 = (0.7 * old + 0.3 * new for old, new in zip((mii, m0i, m00), stats))
    w_grad, b_grad = g.T @ x, g.sum(axis=0)
    if qd:
        want_w = (w_grad * m00[:, None] - m0i * b_grad[:, None]) / (mii * m00[:, None] - m0i ** 2)
        want_b = (b_grad - (m0i * want_w).sum(axis=1)) / m00
    else:
        want_w, want_b = w_grad / mii, b_grad / m00
    np.testing.assert_allclose(gw, want_w, rtol=1e-8)
    np.testing.assert_allclose(gb, want_b, rtol=1e-8)


def test_spatial_classifier_applies_its_module_at_each_pixel():
    x = rand(4, 3, 2)
    out, lin = lua_fn("""function(x)
      require 'nnx'
      torch.manualSeed(1)
      local lin = nn.Linear(4, 3)
      local m = nn.SpatialClassifier(lin)
      return m:forward(x):clone(), lin
    end""")(T(x))
    w, b = N(lin.weight), N(lin.bias)
    np.testing.assert_allclose(N(out), np.einsum("oi,iyx->oyx", w, x) + b[:, None, None], atol=1e-12)
    assert jacobian_error("nn.SpatialClassifier(nn.Sequential():add(nn.Linear(4, 3)):add(nn.Tanh()))", T(x)) < 1e-6


def test_color_transform_rgb2yuv_matrix_and_gradient():
    yuv = np.array([[0.299, 0.587, 0.114], [-0.14713, -0.28886, 0.436], [0.615, -0.51499, -0.10001]])
    x, g = RNG.random((3, 4, 5)), rand(3, 4, 5)
    out, grad = forward_backward("nn.SpatialColorTransform('rgb2yuv')", x, g)
    np.testing.assert_allclose(out, np.einsum("oi,iyx->oyx", yuv, x), atol=1e-12)
    np.testing.assert_allclose(grad, np.einsum("oi,oyx->iyx", yuv, g), atol=1e-12)


@pytest.mark.parametrize("transform, rows", [
    ("yuv2rgb", [[1, 0, 1.13983], [1, -0.39465, -0.58060], [1, 2.03211, 0]]),
    ("rgb2y", [[0.299, 0.587, 0.114]]),
])
def test_color_transform_other_linear_ones(transform, rows):
    m, x, g = np.array(rows), RNG.random((3, 4, 5)), rand(len(rows), 4, 5)
    out, grad = forward_backward(f"nn.SpatialColorTransform('{transform}')", x, g)
    np.testing.assert_allclose(out, np.einsum("oi,iyx->oyx", m, x), atol=1e-12)
    np.testing.assert_allclose(grad, np.einsum("oi,oyx->iyx", m, g), atol=1e-12)


def colorsys_map(fn, x: np.ndarray, order: tuple[int, int, int] = (0, 1, 2)) -> np.ndarray:
    """fn (a colorsys function of three floats) at every pixel of 3 x H x W x, its results in order."""
    out = np.empty_like(x)
    for y in range(x.shape[1]):
        for i in range(x.shape[2]):
            r = fn(*x[:, y, i])
            out[:, y, i] = [r[k] for k in order]
    return out


def test_color_transform_through_image_forward_only():
    pytest.importorskip("PIL", reason="the image package needs the 'image' extra (Pillow)")
    import colorsys
    x = RNG.random((3, 3, 4))
    hsv = N(run_module("nn.SpatialColorTransform('rgb2hsv')", T(x)))
    np.testing.assert_allclose(hsv, colorsys_map(colorsys.rgb_to_hsv, x), atol=1e-12)
    hsl = N(run_module("nn.SpatialColorTransform('rgb2hsl')", T(x)))
    np.testing.assert_allclose(hsl, colorsys_map(colorsys.rgb_to_hls, x, (0, 2, 1)), atol=1e-12)
    back = N(run_module("nn.SpatialColorTransform('hsv2rgb')", T(colorsys_map(colorsys.rgb_to_hsv, x))))
    np.testing.assert_allclose(back, x, atol=1e-12)
    y_nrgb = N(run_module("nn.SpatialColorTransform('rgb2y+nrgb')", T(x)))   # image's nrgb: over r + g + b + 1e-6
    np.testing.assert_allclose(y_nrgb[0], np.einsum("i,iyx->yx", [0.299, 0.587, 0.114], x), atol=1e-12)
    np.testing.assert_allclose(y_nrgb[1:], x / (x.sum(axis=0) + 1e-6), atol=1e-12)
    assert_lua_error("require 'nnx'; local m = nn.SpatialColorTransform('rgb2hsv'); local x = torch.rand(3, 2, 2); "
                     "m:forward(x); m:backward(x, x)",
                     "nn.SpatialColorTransform: updateGradInput not implemented for the non-linear transform rgb2hsv")


# ---------------------------------------------------------------------------- SpatialMatching

def matching(a: np.ndarray, b: np.ndarray, maxh: int, maxw: int, full: bool) -> np.ndarray:
    """Squared distances output[y, x, dy, dx] by direct loops over nnx's documented windows."""
    _, h, w = a.shape
    out = np.full((h, w, maxh, maxw), 1e30)
    base_h, base_w = (-(-maxh // 2) - 1, -(-maxw // 2) - 1) if full else (0, 0)
    for y in range(h):
        for x in range(w):
            for dy in range(maxh):
                for dx in range(maxw):
                    y2, x2 = y + dy - base_h, x + dx - base_w
                    if 0 <= y2 < b.shape[1] and 0 <= x2 < b.shape[2]:
                        out[y, x, dy, dx] = ((a[:, y, x] - b[:, y2, x2]) ** 2).sum()
    return out


matching_fn = lua_fn("""function(a, b, maxh, maxw, full, gradOutput)
  require 'nnx'
  local m = nn.SpatialMatching(maxh, maxw, full)
  local out = m:forward({a, b}):clone()
  local g = m:backward({a, b}, gradOutput)
  return out, g[1]:clone(), g[2]:clone()
end""")


@pytest.mark.parametrize("full, maxh, maxw", [(False, 3, 2), (True, 3, 4), (True, 2, 5)])
def test_matching_distances_and_gradients(full, maxh, maxw):
    a = rand(2, 4, 5)
    b = rand(2, 4, 5) if full else rand(2, 4 + maxh - 1, 5 + maxw - 1)
    want = matching(a, b, maxh, maxw, full)
    g = rand(*want.shape) * (want < 1e29)
    out, ga, gb = map(N, matching_fn(T(a), T(b), maxh, maxw, full, T(g)))
    np.testing.assert_allclose(out, want, rtol=1e-12)

    def loss() -> float:
        return float((matching(a, b, maxh, maxw, full) * g).sum())
    np.testing.assert_allclose(ga, numeric_grad(loss, a), atol=1e-5)
    np.testing.assert_allclose(gb, numeric_grad(loss, b), atol=1e-5)


@pytest.mark.parametrize("dist, normalize", [("euclid", True), ("euclid", False), ("cosine", False)])
def test_graph_edge_weights(dist, normalize):
    x = RNG.random((3, 4, 5))
    x[:, 1, 2] = x[:, 1, 3]          # one zero-length edge: its gradient is 0
    g = rand(2, 4, 5)
    out, grad = forward_backward(f"nn.SpatialGraph{{dist='{dist}', normalize={str(normalize).lower()}}}", x, g)

    def weights(v: np.ndarray) -> np.ndarray:
        w = np.zeros((2, 4, 5))
        for plane, (a, b) in enumerate([(v[:, :, :-1], v[:, :, 1:]), (v[:, :-1, :], v[:, 1:, :])]):
            if dist == "euclid":
                e = np.sqrt(((a - b) ** 2).sum(axis=0)) / (np.sqrt(3) if normalize else 1)
            else:
                e = 3 - ((a + 1e-12) * (b + 1e-12)).sum(axis=0)
            w[plane, :e.shape[0], :e.shape[1]] = e
        return w
    np.testing.assert_allclose(out, weights(x), atol=1e-12)
    if dist == "euclid":
        assert np.isfinite(grad).all()
        x[:, 1, 3] += 0.3            # finite differences need a differentiable point
        out, grad = forward_backward(f"nn.SpatialGraph{{dist='{dist}', normalize={str(normalize).lower()}}}", x, g)
    np.testing.assert_allclose(grad, numeric_grad(lambda: float((weights(x) * g).sum()), x), atol=1e-6)


radial_matching = lua_fn("""function(a, b, maxh, gradOutput)
  require 'nnx'
  local m = nn.SpatialRadialMatching(maxh)
  local out = m:forward({a, b}):clone()
  local g = m:backward({a, b}, gradOutput)
  return out, g[1]:clone(), g[2]:clone()
end""")


def test_radial_matching_is_matching_along_y():
    a, b = rand(2, 4, 5), rand(2, 6, 5)
    want = matching(a, b, 3, 1, False)[..., 0]
    g = rand(*want.shape)
    out, ga, gb = map(N, radial_matching(T(a), T(b), 3, T(g)))
    np.testing.assert_allclose(out, want, rtol=1e-12)

    def loss() -> float:
        return float((matching(a, b, 3, 1, False)[..., 0] * g).sum())
    np.testing.assert_allclose(ga, numeric_grad(loss, a), atol=1e-5)
    np.testing.assert_allclose(gb, numeric_grad(loss, b), atol=1e-5)


# ---------------------------------------------------------------------------- SoftMaxTree

HIERARCHY = {7: [1, 2, 8], 8: [3, 4], 2: [5, 6, 9], 9: [10, 11]}   # root 7
ROOT = 7

soft_max_tree = lua_fn("""function(hierarchy, input, target, gradOutput)
  require 'nnx'
  local h = loadstring('return ' .. hierarchy)()
  torch.manualSeed(3)
  local m = nn.SoftMaxTree(input:size(2), h, %d)
  m:zeroGradParameters()
  local t = torch.IntTensor(target:size(1)):copy(target)
  local out = m:forward({input, t}):clone()
  local grad = m:backward({input, t}, gradOutput)[1]:clone()
  local nodes = {}
  for parent in pairs(h) do
    local params, grads = m:getNodeParameters(parent)
    nodes[parent] = {params[1], params[2], grads[1], grads[2]}
  end
  local updates = {}
  for k, v in pairs(m.updates) do updates[#updates + 1] = {k, v} end
  return out, grad, nodes, updates
end""".replace("%d", str(ROOT)))


def tree_log_likelihood(x: np.ndarray, target: int, params: dict) -> float:
    """The sum of log-softmaxes along target's path to the root, computed directly."""
    parent_of = {c: (p, i) for p, cs in HIERARCHY.items() for i, c in enumerate(cs)}
    total, node = 0.0, target
    while node != ROOT:
        p, i = parent_of[node]
        w, b = params[p]
        z = w @ x + b
        total += z[i] - np.log(np.exp(z).sum())
        node = p
    return total


def test_soft_max_tree_against_direct_path_sums():
    x, target, g = rand(4, 5), np.array([1.0, 4.0, 10.0, 6.0]), rand(4)
    hierarchy = "{" + ", ".join(f"[{p}] = torch.IntTensor{{{', '.join(map(str, cs))}}}"
                                for p, cs in HIERARCHY.items()) + "}"
    out, grad, nodes, updates = soft_max_tree(hierarchy, T(x), T(target), T(g))
    params = {p: (N(nodes[p][1]), N(nodes[p][2])) for p in HIERARCHY}
    want = [tree_log_likelihood(x[i], int(target[i]), params) for i in range(4)]
    np.testing.assert_allclose(N(out), want, atol=1e-12)

    def loss() -> float:
        return sum(g[i] * tree_log_likelihood(x[i], int(target[i]), params) for i in range(4))
    np.testing.assert_allclose(N(grad), numeric_grad(loss, x), atol=1e-6)
    for p in HIERARCHY:
        w, b = params[p]
        np.testing.assert_allclose(N(nodes[p][3]), numeric_grad(loss, w), atol=1e-6)
        np.testing.assert_allclose(N(nodes[p][4]), numeric_grad(loss, b), atol=1e-6)
    counts = {int(updates[i][1]): updates[i][2] for i in range(1, len(updates) + 1)}
    assert counts == {7: 4, 2: 2, 8: 1, 9: 1}   # samples whose path passes through each parent


def test_soft_max_tree_momentum_buffers_follow_its_parameters():
    """Static: the momentum rows of the parents a batch touched (targets 1 and 4 pass through
    parents 7 and 8; bias keys are parentId + maxParentId = parentId + 9), views of whole
    buffers; not static (or before any batch): the two whole buffers."""
    hierarchy = "{" + ", ".join(f"[{p}] = torch.IntTensor{{{', '.join(map(str, cs))}}}"
                                for p, cs in HIERARCHY.items()) + "}"
    before, shapes, filled, dense = lua_fn("""function(hierarchy, root)
      require 'nnx'
      local h = loadstring('return ' .. hierarchy)()
      local m = nn.SoftMaxTree(5, h, root)
      local whole = m:momentumGradParameters()
      local before = {#whole, whole[1]:size(1), whole[1]:size(2), whole[2]:size(1), whole[1]:sum()}
      local input = {torch.randn(2, 5), torch.IntTensor{1, 4}}
      m:forward(input); m:backward(input, torch.ones(2))
      local keyed, shapes = m:momentumGradParameters(), {}
      for k, t in pairs(keyed) do shapes[#shapes + 1] = {k, t:size():totable()} end
      table.sort(shapes, function(a, b) return a[1] < b[1] end)
      keyed[8]:fill(1)
      local dense = nn.SoftMaxTree(5, h, root, false, false):momentumGradParameters()
      return before, shapes, m.momGradParams[1]:sum(), {#dense, dense[1]:size(1), dense[2]:size(1)}
    end""")(hierarchy, ROOT)
    n_children = sum(len(cs) for cs in HIERARCHY.values())
    assert list(before.values()) == [2, n_children, 5, n_children, 0]
    shapes = {int(shapes[i][1]): list(shapes[i][2].values()) for i in range(1, len(shapes) + 1)}
    assert shapes == {7: [3, 5], 8: [2, 5], 16: [3], 17: [2]}
    assert filled == 2 * 5                      # parent 8's rows, written through its view
    assert list(dense.values()) == [2, n_children, n_children]


# ---------------------------------------------------------------------------- softmaxes, tables

def softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_multi_softmax_per_row():
    x, g = rand(2, 3, 4), rand(2, 3, 4)
    out, grad = forward_backward("nn.MultiSoftMax()", x, g)
    s = softmax(x)
    np.testing.assert_allclose(out, s, atol=1e-12)
    np.testing.assert_allclose(grad, s * (g - (g * s).sum(axis=-1, keepdims=True)), atol=1e-12)


def test_balance_divides_by_class_shares_then_renormalises():
    x, g = softmax(rand(3, 5)), rand(3, 5)
    out, grad = forward_backward("nn.Balance(1)", x, g)
    share = x.sum(axis=0) / x.sum()
    scaled = x / share
    rows = scaled.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(out, scaled / rows, atol=1e-12)
    np.testing.assert_allclose(grad, g / rows / share, atol=1e-12)


push_pull = lua_fn("""function(a, b, ga, gb)
  require 'nnx'
  local push = nn.PushTable(1)
  local net = nn.Sequential():add(push):add(nn.SelectTable(1)):add(nn.MulConstant(3))
    :add(push:pull(2)):add(push:pull(1))
  local out = net:forward({a, b})
  local outs = {out[1]:clone(), out[2]:clone(), out[3]:clone()}
  local grad = net:backward({a, b}, {ga, gb, ga:clone():mul(2)})
  return outs, grad[1]:clone(), grad[2]:clone()
end""")


def test_push_pull_teleports_a_tensor_and_sums_its_gradients():
    a, b = rand(3), rand(3)
    ga, gb = rand(3), rand(3)
    outs, grad_a, grad_b = push_pull(T(a), T(b), T(ga), T(gb))
    # {a, b} -> push a -> {b} -> 3b -> pull(2): {3b, a} -> pull(1): {a, 3b, a}
    for got, want in zip(numpy_of(outs), [a, 3 * b, a]):
        np.testing.assert_allclose(got, want, atol=1e-12)
    np.testing.assert_allclose(N(grad_a), ga + 2 * ga, atol=1e-12)
    np.testing.assert_allclose(N(grad_b), 3 * gb, atol=1e-12)


def test_saturated_lu_minus_and_function_wrapper():
    x, g = np.array([-2.0, -0.5, 0.0, 0.7, 3.0, -1.5]), rand(6)
    out, grad = forward_backward("nn.SaturatedLU(-1, -0.25, 1, 2)", x, g)
    np.testing.assert_array_equal(out, np.where(x < -1, -0.25, np.where(x > 1, 2, x)))
    np.testing.assert_array_equal(grad, np.where((x < -1) | (x > 1), 0, g))
    out, grad = forward_backward("nn.Minus()", x, g)
    np.testing.assert_array_equal(out, -x)
    np.testing.assert_array_equal(grad, -g)
    out, grad = forward_backward("nn.FunctionWrapper(function(self) self.k = 3 end, "
                                 "function(self, i) return torch.pow(i, 2) * self.k end, "
                                 "function(self, i, g) return torch.cmul(i, g) * 2 * self.k end)", x, g)
    np.testing.assert_allclose(out, 3 * x ** 2, atol=1e-12)
    np.testing.assert_allclose(grad, 6 * x * g, atol=1e-12)


# ---------------------------------------------------------------------------- criterions

criterion = lua_fn("""function(ctor, input, target)
  require 'nnx'
  local c = loadstring('return ' .. ctor)()
  local loss = c:forward(input, target)
  local grad = c:backward(input, target)
  if torch.isTensor(grad) then grad = grad:clone() end
  return loss, grad
end""")


def check_criterion(ctor: str, x: np.ndarray, target, loss_fn) -> None:
    loss, grad = criterion(ctor, T(x), target)
    assert loss == pytest.approx(loss_fn(x), abs=1e-10)
    np.testing.assert_allclose(N(grad), numeric_grad(lambda: loss_fn(x), x), atol=1e-6)


def test_dist_nll_criterion_forms():
    x, t = rand(6), softmax(rand(6))
    check_criterion("nn.DistNLLCriterion()", x, T(t), lambda v: -(t * np.log(softmax(v))).sum())
    check_criterion("nn.DistNLLCriterion{inputIsADistance=true}", x, T(t),
                    lambda v: -(t * np.log(softmax(-v))).sum())
    p = softmax(rand(6))
    check_criterion("nn.DistNLLCriterion{inputIsProbability=true}", p, T(t), lambda v: -(t * np.log(v)).sum())
    raw = rand(6)
    check_criterion("nn.DistNLLCriterion{targetIsProbability=false}", x, T(raw),
                    lambda v: -(softmax(raw) * np.log(softmax(v))).sum())


def test_dist_margin_criterion_hinge_over_non_targets():
    x = rand(3, 5)
    target = np.array([[2, 4, 0, 0, 0], [1, 0, 0, 0, 0], [5, 3, 1, 0, 0]], dtype=float)

    def loss(v: np.ndarray) -> float:
        total = 0.0
        for row, tr in zip(v, target):
            classes = [int(c) - 1 for c in tr[tr > 0]]
            weakest = min(row[c] for c in classes)
            total += sum(max(0.0, 1 - weakest + row[d]) for d in range(5) if d not in classes)
        return total / 5
    check_criterion("nn.DistMarginCriterion()", x, T(target), loss)


def test_tree_nll_and_super_criterion():
    x = rand(5)
    check_criterion("nn.TreeNLLCriterion()", x, T(np.ones(5)), lambda v: -v.mean())
    a, b, ta = rand(4), rand(4), rand(4)
    loss, grads = lua_fn("""function(a, b, ta, tb)
      require 'nnx'
      local c = nn.SuperCriterion()
      c:add(nn.MSECriterion(), 0.5)
      c:add(nn.AbsCriterion(), 2)
      local loss = c:forward({a, b}, {ta, tb})
      local g = c:backward({a, b}, {ta, tb})
      return loss, {g[1]:clone(), g[2]:clone()}
    end""")(T(a), T(b), T(ta), T(ta))
    assert loss == pytest.approx(0.5 * ((a - ta) ** 2).mean() + 2 * np.abs(b - ta).mean(), abs=1e-12)
    ga, gb = numpy_of(grads)
    np.testing.assert_allclose(ga, 0.5 * 2 * (a - ta) / 4, atol=1e-12)
    np.testing.assert_allclose(gb, 2 * np.sign(b - ta) / 4, atol=1e-12)


def ctc_cost(acts: np.ndarray, labels: list[int]) -> float:
    """-log of the summed probability of every path (blank = class 0) that collapses to labels."""
    y = softmax(acts)
    total = 0.0
    for path in itertools.product(range(acts.shape[1]), repeat=acts.shape[0]):
        collapsed = [k for i, k in enumerate(path) if k != 0 and (i == 0 or k != path[i - 1])]
        if collapsed == labels:
            total += np.prod([y[t, k] for t, k in enumerate(path)])
    return -np.log(total)


ctc_fn = lua_fn("""function(acts, targets, sizes, batchFirst)
  require 'nnx'
  local c = nn.CTCCriterion(batchFirst)
  local t = {}
  for i = 1, #targets do t[i] = {} for j = 1, #targets[i] do t[i][j] = targets[i][j] end end
  local loss = c:forward(acts, t, sizes)
  return loss, c:backward(acts, t):clone()
end""")


def test_ctc_against_path_enumeration():
    # seqLength 4 x batch 2 x 3 classes; the second sequence is 3 steps long
    acts = rand(4, 2, 3)
    targets, sizes = [[1, 2], [2, 2]], [4, 3]
    loss, grad = ctc_fn(T(acts), lua_value(targets), T(np.array(sizes, dtype=float)), False)
    costs = [ctc_cost(acts[:n, b], [k for k in targets[b]]) for b, n in enumerate(sizes)]
    assert loss == pytest.approx(sum(costs) / 2, abs=1e-10)
    want = np.zeros_like(acts)
    for b, n in enumerate(sizes):
        seq = acts[:n, b].copy()
        want[:n, b] = numeric_grad(lambda: ctc_cost(seq, targets[b]), seq)
    np.testing.assert_allclose(N(grad), want, atol=1e-6)
    loss_bf, grad_bf = ctc_fn(T(acts.transpose(1, 0, 2).copy()), lua_value(targets),
                              T(np.array(sizes, dtype=float)), True)
    assert loss_bf == pytest.approx(loss, abs=1e-12)
    np.testing.assert_allclose(N(grad_bf), want.transpose(1, 0, 2), atol=1e-6)


# ---------------------------------------------------------------------------- normalisation, pyramid

def zero_padded_sum(x: np.ndarray, k: np.ndarray) -> np.ndarray:
    """S(x): the kernel-weighted sum over all planes of a zero-padded neighbourhood (odd kernel)."""
    kh, kw = k.shape
    total = np.pad(x.sum(axis=0), ((kh // 2, kh // 2), (kw // 2, kw // 2)))
    h, w = x.shape[1:]
    out = np.zeros((h, w))
    for y in range(h):
        for xx in range(w):
            out[y, xx] = (total[y:y + kh, xx:xx + kw] * k).sum()
    return np.broadcast_to(out, x.shape)


def test_spatial_normalization_formula():
    x = RNG.random((2, 6, 7))
    k = RNG.random((3, 3)) + 0.1
    out = N(run_module("nn.SpatialNormalization(2, torch.Tensor(%s), 0.05)" % str(k.tolist()).replace("[", "{")
                       .replace("]", "}"), T(x)))
    kn = k / k.sum()
    coef = zero_padded_sum(np.ones_like(x), kn)
    mean = zero_padded_sum(x, kn) / coef
    std = np.sqrt(zero_padded_sum((x - mean) ** 2, kn)) / coef
    std = np.where(std > 0.05, std, 0.05)
    np.testing.assert_allclose(out, (x - mean) / std, atol=1e-10)


def test_spatial_pyramid_unfocused_gradients():
    ctor = ("nn.Sequential():add(nn.SpatialPyramid({1, 2}, {nn.SpatialConvolution(2, 3, 3, 3), "
            "nn.SpatialConvolution(2, 3, 3, 3)}, 3, 3, 1, 1)):add(nn.JoinTable(1))")
    x = rand(2, 8, 8)
    assert N(run_module(ctor, T(x))).shape == (6, 8, 8)
    assert jacobian_error(ctor, T(x)) < 1e-6


pyramid = lua_fn("""function(input, fx, fy)
  require 'nnx'
  local C = input:size(1)
  local convs = {nn.SpatialConvolution(C, 2, 3, 3), nn.SpatialConvolution(C, 2, 3, 3)}
  local pyr = nn.SpatialPyramid({1, 2}, convs, 3, 3, 1, 1)
  pyr:focus(fx, fy, 3, 3)
  local out = pyr:forward(input)
  local ws = {}
  for i, c in ipairs(convs) do ws[i] = {c.weight:clone(), c.bias:clone()} end
  return {out[1]:clone(), out[2]:clone()}, ws
end""")


def conv3x3(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Valid 3x3 cross-correlation of C x H x W x by O x C x 3 x 3 w, plus b."""
    _, h, wd = x.shape
    out = np.zeros((w.shape[0], h - 2, wd - 2))
    for dy in range(3):
        for dx in range(3):
            out += np.einsum("oc,cyx->oyx", w[:, :, dy, dx], x[:, dy:dy + h - 2, dx:dx + wd - 2])
    return out + b[:, None, None]


def test_spatial_pyramid_scales_pads_and_crops():
    """Unfocused: scale r averages r x r blocks, pads by (k - d) / 2 for the 3x3 processor and
    repeats each output pixel r x r times. Focused at (x, y) for a 3x3 output: scale r takes the
    5r x 5r window whose left column is x - ceil(5r / 2) + 1 (1-based, zeros outside)."""
    x = rand(2, 8, 8)
    outs, ws = pyramid(T(x), None, None)
    (w1, b1), (w2, b2) = numpy_of(ws)
    pad = lambda a: np.pad(a, ((0, 0), (1, 1), (1, 1)))  # noqa: E731
    fine, coarse = numpy_of(outs)
    np.testing.assert_allclose(fine, conv3x3(pad(x), w1, b1), atol=1e-12)
    want = conv3x3(pad(block_average(x, 2)), w2, b2)
    np.testing.assert_allclose(coarse, want.repeat(2, axis=1).repeat(2, axis=2), atol=1e-12)

    fx, fy = 5, 3
    outs, ws = pyramid(T(x), fx, fy)
    for got, r, (w, b) in zip(numpy_of(outs), (1, 2), numpy_of(ws)):
        size = 5 * r
        padded = np.pad(x, ((0, 0), (size, size), (size, size)))
        left, top = fx - -(-size // 2), fy - -(-size // 2)          # 0-based, before the padding
        window = padded[:, size + top:size + top + size, size + left:size + left + size]
        np.testing.assert_allclose(got, conv3x3(block_average(window, r), w, b), atol=1e-12)


fovea = lua_fn("""function(input, bilinear, fov, x, y)
  require 'nnx'
  local C = input:size(1)
  local m = nn.SpatialFovea{nInputPlane = C, ratios = {1, 2}, processors = {nn.Identity(), nn.Identity()},
                            preProcessors = {nn.Identity(), nn.MulConstant(2)}, fov = fov, sub = 1,
                            bilinear = bilinear}
  m:focus(x, y)
  return m:forward(input):clone()
end""")


def block_average(x: np.ndarray, r: int) -> np.ndarray:
    c, h, w = x.shape
    return x.reshape(c, h // r, r, w // r, r).mean(axis=(2, 4))


def test_fovea_global_and_focused_outputs():
    x = rand(2, 8, 8)
    out = N(fovea(T(x), False, 1, None, None))
    coarse = 2 * block_average(x, 2)
    np.testing.assert_allclose(out, np.concatenate([x, coarse.repeat(2, axis=1).repeat(2, axis=2)]), atol=1e-12)
    out = N(fovea(T(x), True, 1, None, None))
    np.testing.assert_allclose(out, np.concatenate([x, bilinear(2 * bilinear(x, 4, 4), 8, 8)]), atol=1e-12)
    # focused at (x=4, y=7) with a 3x3 window: padding fov - sub = 2 (1 per side)
    out = N(fovea(T(x), False, 3, 4, 7))
    windows = []
    for r, scale in [(1, x), (2, coarse)]:
        padded = np.pad(scale, ((0, 0), (1, 1), (1, 1)))
        ox, oy = (4 - 1) // r, (7 - 1) // r
        windows.append(padded[:, oy:oy + 3, ox:ox + 3])
    np.testing.assert_allclose(out, np.concatenate(windows), atol=1e-12)


# ---------------------------------------------------------------------------- errors

def test_bad_inputs_name_the_module_and_sizes():
    assert_lua_error("require 'nnx'; nn.SpatialReSampling{owidth=3, oheight=3}:forward(torch.rand(5))",
                     "nn.SpatialReSampling: input must be 3D or 4D, received: [5]")
    assert_lua_error("require 'nnx'; nn.SpatialLinear(3, 2):forward(torch.rand(4, 2, 2))",
                     "nn.SpatialLinear: input must be 3 x H x W, got size [4x2x2]")
    assert_lua_error("require 'nnx'; nn.SpatialMatching(3, 3):forward({torch.rand(2, 4, 4), torch.rand(2, 4, 4)})",
                     "nn.SpatialMatching: expected two C x H x W maps, the second at least C x 6 x 6")
    assert_lua_error("require 'nnx'; nn.SoftMaxTree(3, {[1] = torch.IntTensor{2, 3}}):forward("
                     "{torch.rand(2, 3), torch.IntTensor{4, 2}})",
                     "nn.SoftMaxTree: node 4 is not the root and has no parent in the tree")
    assert_lua_error("require 'nnx'; nn.SpatialFovea{nInputPlane = 1, ratios = {1, 2}, fov = 3, sub = 1, "
                     "processors = {nn.Identity(), nn.Identity()}}:forward(torch.rand(1, 4, 4))",
                     "nn.SpatialFovea: the processors must shrink their input by fov - sub = 2 pixels "
                     "(scale 2, ratio 2, gives 8x8 maps, scale 1 gives 6x6)")
    assert_lua_error("require 'nnx'; nnx.test()",
                     "nnx.test: nnx's suite is not bundled: dofile('<nnx checkout>/test/test-all.lua') defines it")
    assert_lua_error("require 'nnx'; nn.SpatialDownSampling(3, 3):forward(torch.rand(1, 2, 5))",
                     "nn.SpatialDownSampling: expected a C x H x W input of at least 3x3 pixels, got size [1x2x5]")


# ---------------------------------------------------------------------------- nnx's own suite

NNX_CHECKOUT = Path(os.environ.get("NNX_CHECKOUT", Path.home() / "programs" / "clementfarabet+lua---nnx"))
# Its cases that take under a second or so; SpatialMatching_1..5, SpatialPyramid_unfocused and
# SpatialNormalization_Gaussian1D/2D pass too, in 3 to 15 s each (run all 39 with nnx.test()).
# Left out: TreeNLLCriterion's case passes a number as asserteq's message, which torch7's last
# Tester rejects too. SpatialDownSampling's case draws an image smaller than its ratio in about
# one run in seven (sizes 4..11, ratios 2..6), and nnx's own updateOutput raises 'input too
# small' then as ours does; test_downsampling_averages_whole_blocks covers the class.
# (SpatialReSampling_2 sizes torch.rand with fractions, which truncate as in torch7.)
NNX_CASES = ["SpatialPadding", "SpatialLinear", "SpatialUpSampling", "SpatialMaxPooling", "SpatialConvolution",
             "Abs", "HardShrink", "SpatialReSampling_1", "SpatialReSampling_2",
             *(f"SpatialReSamplingEx{i}" for i in range(1, 6)), *(f"SpatialGraph_{i}" for i in range(1, 6)),
             "SpatialFovea_focused", "SpatialFovea_unfocused", "SpatialFovea_bilinear", "SpatialPyramid_focused",
             "SpatialNormalization_io", "SoftMaxTree", "CTCCriterion", "Balance", "MultiSoftMax", "PushPullTable"]


@pytest.mark.skipif(not (NNX_CHECKOUT / "test" / "test-all.lua").is_file(),
                    reason="needs a checkout of clementfarabet/lua---nnx (set NNX_CHECKOUT)")
def test_nnx_own_suite():
    ok, report = lua_fn("""function(path, names)
      require 'nnx'
      dofile(path)
      local tests = {}
      for i = 1, #names do tests[i] = names[i] end
      local ok, err = pcall(nnx.test, tests)
      return ok, tostring(err)
    end""")(str(NNX_CHECKOUT / "test" / "test-all.lua"), lua_value(NNX_CASES))
    assert ok, report


def test_resampling_backward_takes_gradoutput_size():
    """nnx's kernel took the output size from gradOutput (dpnn's SpatialGlimpse tests rely on it):
    the gradient is the transpose of the bilinear map to gradOutput's size."""
    x, g = rand(2, 4, 5), rand(2, 3, 7)
    backward = lua_fn("""function(x, g)
      require 'nnx'
      local m = nn.SpatialReSampling{owidth = 2, oheight = 2}
      m:forward(x)
      return m:backward(x, g):clone()
    end""")
    want = bilinear_matrix(4, 3).T @ g @ bilinear_matrix(5, 7)
    np.testing.assert_allclose(N(backward(T(x), T(g))), want, atol=1e-12)
    with pytest.raises(luabridge.LuaError, match=r"gradOutput \[3, 7\] does not have the planes of input \[2, 4, 5\]"):
        backward(T(x), T(rand(3, 7)))
