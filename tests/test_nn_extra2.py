"""nn extras: SparseLinear, WeightNorm, LinearWeightNorm, fractional max pooling (2D and 3D),
SpatialDepthWiseConvolution — against numpy float64 references and central differences."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pytest

import luabridge
from nn_layers_check import backward, call, check_gradients, field, forward, lua_tensor, module

from helpers import numeric_grad

_TABLE = "function(...) return {...} end"


def _sparse_sample(rng: np.random.Generator, n_in: int, nnz: int) -> np.ndarray:
    """An nnz x 2 (index, value) array with distinct 1-based indices."""
    idx = rng.permutation(n_in)[:nnz] + 1
    return np.stack([idx.astype(float), rng.standard_normal(nnz)], axis=1)


def _dense(samples: Sequence[np.ndarray], n_in: int) -> np.ndarray:
    out = np.zeros((len(samples), n_in))
    for i, s in enumerate(samples):
        np.add.at(out[i], s[:, 0].astype(int) - 1, s[:, 1])
    return out


def _table(arrays: Sequence[np.ndarray]) -> Any:
    return luabridge.eval(_TABLE)(*[lua_tensor(a) for a in arrays])


# ---------------------------------------------------------------- SparseLinear

def test_sparse_linear_batch_matches_dense(rng):
    n_in, n_out = 30, 4
    m = module(f"nn.SparseLinear({n_in}, {n_out}, true)")
    samples = [_sparse_sample(rng, n_in, k) for k in (3, 1, 5, 0)]
    samples[2][1, 0] = samples[2][0, 0]  # a repeated index adds up
    w, b = field(m, "weight"), field(m, "bias")
    b[:] = rng.standard_normal(n_out)
    x = _dense(samples, n_in)
    t = _table(samples)
    np.testing.assert_allclose(forward(m, t), x @ w.T + b, rtol=1e-12)
    g = rng.standard_normal((4, n_out))
    gi = call("function(m, x, g) m:zeroGradParameters(); return m:backward(x, g, 0.5) end",
              m, t, lua_tensor(g))
    np.testing.assert_allclose(field(m, "gradWeight"), 0.5 * g.T @ x, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(field(m, "gradBias"), 0.5 * g.sum(0), rtol=1e-12)
    for i in range(4):
        got = luabridge.to_numpy(gi[i + 1])
        np.testing.assert_array_equal(got[:, 0], np.arange(1, n_in + 1))
        np.testing.assert_allclose(got[:, 1], g[i] @ w, rtol=1e-12)


def test_sparse_linear_single_and_legacy_inputs(rng):
    n_in, n_out = 12, 3
    m = module(f"nn.SparseLinear({n_in}, {n_out}, true)")
    w, b = field(m, "weight"), field(m, "bias")
    np.testing.assert_array_equal(forward(m, luabridge.eval(_TABLE)()), b)  # empty batch
    s = _sparse_sample(rng, n_in, 4)
    out = forward(m, np.asfortranarray(s))  # a non-contiguous sample
    np.testing.assert_allclose(out, _dense([s], n_in)[0] @ w.T + b, rtol=1e-12)
    legacy = np.stack([_sparse_sample(rng, n_in, 4) for _ in range(3)])
    x = _dense(list(legacy), n_in)
    np.testing.assert_allclose(forward(m, legacy), x @ w.T + b, rtol=1e-12)
    g = rng.standard_normal((3, n_out))
    gi = backward(m, legacy, g)
    assert gi.shape == (3, n_in, 2)
    np.testing.assert_allclose(gi[:, :, 1], g @ w, rtol=1e-12)
    np.testing.assert_allclose(field(m, "gradWeight"), g.T @ x, rtol=1e-12, atol=1e-14)


def test_sparse_linear_sparse_update_and_zeroing(rng):
    n_in, n_out = 20, 3
    m = module(f"nn.SparseLinear({n_in}, {n_out})")
    m.weightDecay = 0.1
    samples = [_sparse_sample(rng, n_in, 4), _sparse_sample(rng, n_in, 2)]
    w0, b0 = field(m, "weight").copy(), field(m, "bias").copy()
    g = rng.standard_normal((2, n_out))
    call("function(m, x, g) m:zeroGradParameters(); m:forward(x); m:backward(x, g); m:updateParameters(0.5) end",
         m, _table(samples), lua_tensor(g))
    x = _dense(samples, n_in)
    touched = np.zeros(n_in, bool)
    touched[np.concatenate([s[:, 0] for s in samples]).astype(int) - 1] = True
    # one accumulation: only the input's columns move (decay included), as torch7
    grad = g.T @ x + 0.1 * w0
    np.testing.assert_allclose(field(m, "weight"), np.where(touched, w0 - 0.5 * grad, w0), rtol=1e-12)
    np.testing.assert_allclose(field(m, "bias"), b0 - 0.5 * g.sum(0), rtol=1e-12)
    call("function(m) m:zeroGradParameters() end", m)
    assert not field(m, "gradWeight")[:, touched].any() and not field(m, "gradBias").any()


@pytest.mark.parametrize("code, arg, match", [
    ("function(m) return m:forward(torch.Tensor({{11, 1}})) end", None, "index out of bound"),
    ("function(m) return m:forward(torch.Tensor({{0, 1}})) end", None, "index out of bound"),
    ("function(m) return m:forward(torch.Tensor(3, 3)) end", None, "nnz x 2"),
    ("function(m) return m:forward({torch.Tensor({{1, 1}}), torch.Tensor(2)}) end", None, r"input\[2\]"),
    ("function(m) m:forward(torch.Tensor({{1, 1}})); return m:backward(torch.Tensor({{1, 1}}), torch.Tensor(4)) end",
     None, "gradOutput size 4 does not match output size 3"),
])
def test_sparse_linear_errors(code, arg, match):
    m = module("nn.SparseLinear(10, 3)")
    w = field(m, "weight").copy()
    with pytest.raises(luabridge.LuaError, match=match):
        call(code, m)
    np.testing.assert_array_equal(field(m, "weight"), w)


# ---------------------------------------------------------------- WeightNorm, LinearWeightNorm

def _wn_weight(v: np.ndarray, g: np.ndarray, eps: float = 1e-4) -> np.ndarray:
    return g * v / np.sqrt((v ** 2).sum(1, keepdims=True) + eps)


def test_weight_norm_linear_forward_and_gradients(rng):
    m = module("nn.WeightNorm(nn.Linear(4, 3))")
    v, g, b = field(m, "v"), field(m, "g"), field(m, "bias")
    v[:] = rng.standard_normal(v.shape)
    g[:] = rng.uniform(0.5, 2, (3, 1))
    b[:] = rng.standard_normal(3)
    x = rng.standard_normal((5, 4))
    np.testing.assert_allclose(forward(m, x), x @ _wn_weight(v, g).T + b, rtol=1e-12)
    np.testing.assert_allclose(field(m, "weight"), _wn_weight(v, g), rtol=1e-12)
    check_gradients(m, x, ("v", "g", "bias"), rng)


def test_weight_norm_conv_output_dim_2(rng):
    # weight 2 x 3 x 2 x 2 normalized along dimension 2 (3 units of 2*2*2 elements)
    m = module("nn.WeightNorm(nn.SpatialConvolution(3, 2, 2, 2), 2)")
    v, g = field(m, "v"), field(m, "g")
    assert v.shape == (3, 8)
    g[:] = rng.uniform(0.5, 2, (3, 1))
    x = rng.standard_normal((3, 4, 4))
    forward(m, x)
    # unit i of the normalized view holds the weight's [:, i] slice, dims kept in order
    w = _wn_weight(v, g).reshape(3, 2, 2, 2).transpose(1, 0, 2, 3)
    np.testing.assert_allclose(field(m, "weight"), w, rtol=1e-12)
    check_gradients(m, x, ("v", "g"), rng)


def test_weight_norm_accumulates_and_updates(rng):
    m = module("nn.WeightNorm(nn.Linear(3, 2))")
    x, go = rng.standard_normal((4, 3)), rng.standard_normal((4, 2))
    run = "function(m, x, g, s) m:forward(x); m:backward(x, g, s) end"
    call("function(m) m:zeroGradParameters() end", m)
    call(run, m, lua_tensor(x), lua_tensor(go), 1.0)
    one = field(m, "gradV").copy(), field(m, "gradG").copy()
    call(run, m, lua_tensor(x), lua_tensor(go), 2.0)
    np.testing.assert_allclose(field(m, "gradV"), 3 * one[0], rtol=1e-10)
    np.testing.assert_allclose(field(m, "gradG"), 3 * one[1], rtol=1e-10)
    v0, g0 = field(m, "v").copy(), field(m, "g").copy()
    call("function(m) m:updateParameters(0.1) end", m)
    np.testing.assert_allclose(field(m, "v"), v0 - 0.3 * one[0], rtol=1e-12)
    np.testing.assert_allclose(field(m, "g"), g0 - 0.3 * one[1], rtol=1e-12)


def test_weight_norm_errors():
    with pytest.raises(luabridge.LuaError, match="must have a weight"):
        module("nn.WeightNorm(nn.ReLU())")
    with pytest.raises(luabridge.LuaError, match="outputDim 3 out of range"):
        module("nn.WeightNorm(nn.Linear(2, 3), 3)")


def test_linear_weight_norm(rng):
    m = module("nn.LinearWeightNorm(4, 3)")
    v, g, b = field(m, "v"), field(m, "g"), field(m, "bias")
    v[:] = rng.standard_normal(v.shape)
    g[:] = rng.uniform(0.5, 2, (3, 1))
    for x in (rng.standard_normal((5, 4)), rng.standard_normal(4)):
        w = g * v / np.linalg.norm(v, axis=1, keepdims=True)
        np.testing.assert_allclose(forward(m, x), x @ w.T + b, rtol=1e-12)
        check_gradients(m, x, ("v", "g", "bias"), rng)


def test_linear_weight_norm_conversions(rng):
    lin = module("nn.Linear(4, 3, false)")
    wn = call("function(l) return nn.LinearWeightNorm.fromLinear(l) end", lin)
    assert wn.bias is None
    x = rng.standard_normal((2, 4))
    np.testing.assert_allclose(forward(wn, x), x @ field(lin, "weight").T, rtol=1e-12)
    back = call("function(m) return m:toLinear() end", wn)
    np.testing.assert_allclose(field(back, "weight"), field(lin, "weight"), rtol=1e-12)
    with pytest.raises(luabridge.LuaError, match="do not fit a 4 -> 3 layer"):
        call("function(m) m:forward(torch.rand(2, 4)); m:accGradParameters(torch.rand(2, 4), torch.rand(2, 5)) end",
             wn)


# ---------------------------------------------------------------- fractional max pooling

def _starts(u: float, size: int, out: int, pool: int) -> list[int]:
    if out == 1:
        return [size - pool]
    alpha = (size - pool) / (out - 1)
    return [int(np.floor((i + u) * alpha) - np.floor(u * alpha)) for i in range(out - 1)] + [size - pool]


def _fractional_ref(x: np.ndarray, samples: np.ndarray, outs: Sequence[int], pools: Sequence[int],
                    slots: Sequence[int]) -> np.ndarray:
    """x: P x S1 x ... x Sd; samples: P x d; slot k: the sample of pooled dimension k."""
    d = len(outs)
    res = np.zeros((x.shape[0],) + tuple(outs))
    for p in range(x.shape[0]):
        starts = [_starts(samples[p, slots[k]], x.shape[k + 1], outs[k], pools[k]) for k in range(d)]
        for o in np.ndindex(*outs):
            win = tuple(slice(starts[k][o[k]], starts[k][o[k]] + pools[k]) for k in range(d))
            res[(p,) + o] = x[p][win].max()
    return res


@pytest.mark.parametrize("shape, ctor, outs, pools", [
    ((2, 9, 8), "nn.SpatialFractionalMaxPooling(2, 3, 4, 5)", (5, 4), (3, 2)),
    ((2, 3, 10, 9), "nn.SpatialFractionalMaxPooling(3, 2, 0.5, 0.7)", (7, 4), (2, 3)),
    ((2, 3, 7), "nn.SpatialFractionalMaxPooling(2, 2, 1, 1)", (1, 1), (2, 2)),
])
def test_spatial_fractional_max_pooling(rng, shape, ctor, outs, pools):
    m = module(ctor + ":fixPoolingRegions()")
    # distinct values, small enough that central differences of the loss stay well inside tol
    x = rng.permutation(np.prod(shape)).reshape(shape) / np.prod(shape)
    out = forward(m, x)
    samples = field(m, "randomSamples").reshape(-1, 2)  # (W, H) per plane
    planes = x.reshape((-1,) + shape[-2:])
    ref = _fractional_ref(planes, samples, outs, pools, (1, 0))
    np.testing.assert_array_equal(out, ref.reshape(shape[:-2] + tuple(outs)))
    check_gradients(m, x, (), rng)


def test_fractional_regions_redrawn_unless_fixed(rng):
    m = module("nn.SpatialFractionalMaxPooling(2, 2, 3, 3)")
    x = rng.standard_normal((4, 9, 9))
    forward(m, x)
    first = field(m, "randomSamples").copy()
    forward(m, x)
    assert not np.array_equal(first, field(m, "randomSamples"))
    call("function(m) m:fixPoolingRegions() end", m)
    held = field(m, "randomSamples").copy()
    forward(m, x)
    np.testing.assert_array_equal(held, field(m, "randomSamples"))


def test_volumetric_fractional_max_pooling(rng):
    m = module("nn.VolumetricFractionalMaxPooling(2, 3, 2, 3, 2, 4):fixPoolingRegions()")
    shape = (2, 2, 7, 6, 5)  # batch x planes x H x W x T
    x = rng.permutation(np.prod(shape)).reshape(shape).astype(float)
    out = forward(m, x)
    samples = field(m, "randomSamples").reshape(-1, 3)  # (T, W, H) per plane
    ref = _fractional_ref(x.reshape(-1, 7, 6, 5), samples, (4, 2, 3), (2, 3, 2), (2, 1, 0))
    np.testing.assert_array_equal(out, ref.reshape(2, 2, 4, 2, 3))
    check_gradients(m, x[0].copy(), (), rng)


@pytest.mark.parametrize("ctor, shape, match", [
    ("nn.SpatialFractionalMaxPooling(3, 2, 4, 4)", (1, 6, 6), r"poolSizeW \(3\) too large"),
    ("nn.SpatialFractionalMaxPooling(2, 2, 4, 4)", (6, 6), "expected 3D or 4D"),
    ("nn.SpatialFractionalMaxPooling(2, 2, 0.1, 0.5)", (1, 6, 6), "ratio or input W too small"),
])
def test_fractional_errors(ctor, shape, match):
    m = module(ctor)
    with pytest.raises(luabridge.LuaError, match=match):
        forward(m, np.zeros(shape))


def test_fractional_constructor_errors():
    with pytest.raises(luabridge.LuaError, match="poolSizeW must be at least 2"):
        module("nn.SpatialFractionalMaxPooling(1, 2, 3, 3)")
    with pytest.raises(luabridge.LuaError, match=r"ratioH must lie in \(0, 1\)"):
        module("nn.SpatialFractionalMaxPooling(2, 2, 0.5, 1.5)")


# ---------------------------------------------------------------- SpatialDepthWiseConvolution

def _depthwise_ref(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, stride: tuple[int, int],
                   pad: tuple[int, int]) -> np.ndarray:
    """x: B x n x H x W; w: m x n x kH x kW; b: m x n. Output plane i*m + j."""
    (dH, dW), (pH, pW) = stride, pad
    m, n, kH, kW = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pH, pH), (pW, pW)))
    oH, oW = (xp.shape[2] - kH) // dH + 1, (xp.shape[3] - kW) // dW + 1
    out = np.zeros((x.shape[0], n, m, oH, oW))
    for i in range(n):
        for j in range(m):
            for y in range(oH):
                for z in range(oW):
                    patch = xp[:, i, y * dH:y * dH + kH, z * dW:z * dW + kW]
                    out[:, i, j, y, z] = (patch * w[j, i]).sum((1, 2)) + (0 if b is None else b[j, i])
    return out.reshape(x.shape[0], n * m, oH, oW)


@pytest.mark.parametrize("ctor, shape, stride, pad", [
    ("nn.SpatialDepthWiseConvolution(3, 2, 3, 2)", (2, 3, 5, 6), (1, 1), (0, 0)),
    ("nn.SpatialDepthWiseConvolution(2, 3, 2, 3, 2, 1, 1, 2)", (2, 6, 5), (1, 2), (2, 1)),
    ("nn.SpatialDepthWiseConvolution(2, 2, 2, 2):noBias()", (1, 2, 4, 4), (1, 1), (0, 0)),
])
def test_depthwise_convolution(rng, ctor, shape, stride, pad):
    m = module(ctor)
    n, mult = m.nInputPlane, m.nOutputPlane
    w = field(m, "weight").reshape(mult, n, m.kH, m.kW)
    has_bias = m.bias is not None
    b = field(m, "bias") if has_bias else None
    x = rng.standard_normal(shape)
    batch = x if x.ndim == 4 else x[None]
    ref = _depthwise_ref(batch, w, b, stride, pad)
    np.testing.assert_allclose(forward(m, x), ref if x.ndim == 4 else ref[0], rtol=1e-10, atol=1e-12)
    check_gradients(m, x, ("weight", "bias") if has_bias else ("weight",), rng)


def test_depthwise_convolution_strided_input_and_errors(rng):
    m = module("nn.SpatialDepthWiseConvolution(2, 2, 2, 2)")
    x = rng.standard_normal((5, 5, 2)).transpose(2, 0, 1)  # a non-contiguous 2 x 5 x 5 view
    w = field(m, "weight").reshape(2, 2, 2, 2)
    ref = _depthwise_ref(x[None], w, field(m, "bias"), (1, 1), (0, 0))[0]
    np.testing.assert_allclose(forward(m, x), ref, rtol=1e-10, atol=1e-12)
    with pytest.raises(luabridge.LuaError, match="SpatialDepthWiseConvolution"):
        forward(m, np.zeros((3, 5, 5)))
    with pytest.raises(luabridge.LuaError, match="does not match the output size 4x4x4"):
        backward(m, rng.standard_normal((2, 5, 5)), np.zeros((8, 4, 3)))


# ---------------------------------------------------------------- TemporalDynamicKMaxPooling

@pytest.mark.parametrize("shape, ctor, k", [
    ((7, 3), "nn.TemporalDynamicKMaxPooling(3)", 3),
    ((2, 9, 4), "nn.TemporalDynamicKMaxPooling(2, 0.5)", 5),
])
def test_dynamic_k_max_pooling(rng, shape, ctor, k):
    m = module(ctor)
    x = rng.permutation(np.prod(shape)).reshape(shape).astype(float)
    axis = x.ndim - 2
    keep = np.sort(np.argsort(-x, axis=axis, kind="stable").take(range(k), axis=axis), axis=axis)
    np.testing.assert_array_equal(forward(m, x), np.take_along_axis(x, keep, axis=axis))
    check_gradients(m, x, (), rng)


def test_dynamic_k_max_pooling_errors():
    m = module("nn.TemporalDynamicKMaxPooling(4)")
    with pytest.raises(luabridge.LuaError, match=r"sequence length \(3\) too small for k = 4"):
        forward(m, np.zeros((3, 2)))
    with pytest.raises(luabridge.LuaError, match="expected 2D"):
        forward(m, np.zeros(5))


# ---------------------------------------------------------------- FeatureLPPooling

@pytest.mark.parametrize("ctor, shape, feat_axis", [
    ("nn.FeatureLPPooling(3, 2, 2, true)", (2, 9, 3), 1),
    ("nn.FeatureLPPooling(2, 1, 1, false)", (6,), 0),
    ("nn.FeatureLPPooling(4, 3, 3, false)", (10, 2, 2), 0),
])
def test_feature_lp_pooling(rng, ctor, shape, feat_axis):
    m = module(ctor)
    width, stride, p = int(m.width), int(m.stride), m.power
    x = rng.uniform(0.5, 2, shape)
    n_out = (shape[feat_axis] - width) // stride + 1
    windows = [np.take(x, range(o * stride, o * stride + width), axis=feat_axis) for o in range(n_out)]
    ref = np.stack([(w ** p).sum(feat_axis) ** (1 / p) for w in windows], axis=feat_axis)
    np.testing.assert_allclose(forward(m, x), ref, rtol=1e-12)
    check_gradients(m, x, (), rng)


def test_feature_lp_pooling_zero_windows_and_errors():
    m = module("nn.FeatureLPPooling(3, 1, 2, false)")
    with pytest.raises(luabridge.LuaError, match="call updateOutput with this input"):
        backward(m, np.zeros(6), np.ones(4))
    forward(m, np.zeros(6))
    gi = backward(m, np.zeros(6), np.ones(4))
    np.testing.assert_array_equal(gi, np.zeros(6))
    with pytest.raises(luabridge.LuaError, match="fewer than the width 3"):
        forward(m, np.zeros(2))
    with pytest.raises(luabridge.LuaError, match="width must be within 2 to 16"):
        module("nn.FeatureLPPooling(1, 1, 2)")


# ---------------------------------------------------------------- PartialLinear, Kmeans

def test_partial_linear(rng):
    m = module("nn.PartialLinear(4, 6)")
    w = luabridge.to_numpy(call("function(m) return m.network:get(1):get(2).weight end", m))
    b = field(m, "bias")
    b[:] = rng.standard_normal((1, 6))
    part = np.array([5.0, 2.0, 3.0])
    call("function(m, p) m:setPartition(p) end", m, lua_tensor(part))
    x = rng.standard_normal((3, 4))
    rows = part.astype(int) - 1
    np.testing.assert_allclose(forward(m, x), x @ w[rows].T + b[0, rows], rtol=1e-12)
    g = rng.standard_normal((3, 3))
    gi = backward(m, x, g)
    np.testing.assert_allclose(gi, g @ w[rows], rtol=1e-12)
    expect_gb = np.zeros(6)
    expect_gb[rows] = g.sum(0)
    np.testing.assert_allclose(field(m, "gradBias")[0], expect_gb, rtol=1e-12)
    call("function(m) m:resetPartition() end", m)
    np.testing.assert_allclose(forward(m, x), x @ w.T + b[0], rtol=1e-12)
    with pytest.raises(luabridge.LuaError, match=r"indices in \[1, 6\]"):
        call("function(m) m:setPartition(torch.Tensor({7})) end", m)
    with pytest.raises(luabridge.LuaError, match="expected a batch x 4 input"):
        forward(m, np.zeros((2, 3)))


def test_kmeans_step(rng):
    m = module("nn.Kmeans(3, 2)")
    w = field(m, "weight")
    x = rng.standard_normal((20, 2))
    d = ((x[None] - w[:, None]) ** 2).sum(2)
    nearest = d.argmin(0)
    np.testing.assert_array_equal(forward(m, x), nearest + 1)
    assert abs(m.loss - d.min(0).sum()) < 1e-10
    call("function(m, x) m:zeroGradParameters(); m:backward(x, torch.Tensor()) end", m, lua_tensor(x))
    expect = np.zeros((3, 2))
    for c in range(3):
        members = x[nearest == c]
        expect[c] = -(members - w[c]).sum(0) / (len(members) + 1e-7)
    np.testing.assert_allclose(field(m, "gradWeight"), expect, rtol=1e-9, atol=1e-12)
    with pytest.raises(luabridge.LuaError, match="expected a batch x 2 input"):
        forward(m, np.zeros((4, 3)))


# ---------------------------------------------------------------- IndexLinear

def _index_sample(rng: np.random.Generator, n_in: int, nnz: int) -> tuple[np.ndarray, np.ndarray]:
    return rng.integers(1, n_in + 1, nnz).astype(np.int64), rng.standard_normal(nnz)


def test_index_linear_forms_and_update(rng):
    n_in, n_out = 15, 3
    m = module(f"nn.IndexLinear({n_in}, {n_out}, true)")
    w, b = field(m, "weight"), field(m, "bias")
    w[:] = rng.standard_normal(w.shape)
    b[:] = rng.standard_normal(n_out)
    smp = [_index_sample(rng, n_in, k) for k in (4, 2, 5)]
    x = np.zeros((3, n_in))
    for i, (k, v) in enumerate(smp):
        np.add.at(x[i], k - 1, v)
    tables = luabridge.eval("function(a, b) return {a, b} end")(
        _table([k for k, _ in smp]), _table([v for _, v in smp]))
    flat = luabridge.eval(_TABLE)(lua_tensor(np.concatenate([k for k, _ in smp])),
                                  lua_tensor(np.concatenate([v for _, v in smp])),
                                  lua_tensor(np.array([4, 2, 5], dtype=np.int64)))
    np.testing.assert_allclose(forward(m, tables), x @ w + b, rtol=1e-12)
    np.testing.assert_allclose(forward(m, flat), x @ w + b, rtol=1e-12)
    single = luabridge.eval(_TABLE)(lua_tensor(smp[0][0]), lua_tensor(smp[0][1]))
    np.testing.assert_allclose(forward(m, single), x[0] @ w + b, rtol=1e-12)
    g = rng.standard_normal((3, n_out))
    gi = call("function(m, x, g) m:zeroGradParameters(); m:forward(x); return m:backward(x, g) end",
              m, flat, lua_tensor(g))
    np.testing.assert_allclose(luabridge.to_numpy(gi[2]), g @ w.T, rtol=1e-12)
    w0, b0 = w.copy(), b.copy()
    m.weightDecay = 0.1
    call("function(m) m:updateParameters(0.5) end", m)
    counts = np.bincount(np.concatenate([k for k, _ in smp]) - 1, minlength=n_in)
    expect = w0 * (0.9 ** counts)[:, None] - 0.5 * x.T @ g
    np.testing.assert_allclose(w, expect, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(b, b0 - 0.5 * g.sum(0), rtol=1e-12)


def test_index_linear_acc_update_offset_and_errors(rng):
    m = module("nn.IndexLinear(6, 2, false, 1)")  # keysOffset 1: keys are 0-based
    w = field(m, "weight")
    w[:] = rng.standard_normal(w.shape)
    k, v = np.array([0, 5, 0], dtype=np.int64), rng.standard_normal(3)
    inp = luabridge.eval(_TABLE)(lua_tensor(k), lua_tensor(v))
    x = np.zeros(6)
    np.add.at(x, k, v)
    np.testing.assert_allclose(forward(m, inp), x @ w + field(m, "bias"), rtol=1e-12)
    w0 = w.copy()
    g = rng.standard_normal(2)
    call("function(m, x, g) m:accUpdateGradParameters(x, g, 0.1) end", m, inp, lua_tensor(g))
    np.testing.assert_allclose(w, w0 - 0.1 * np.outer(x, g), rtol=1e-12)
    bad = luabridge.eval(_TABLE)(lua_tensor(np.array([6], dtype=np.int64)), lua_tensor(np.ones(1)))
    with pytest.raises(luabridge.LuaError, match="keys out of range"):
        forward(m, bad)
    with pytest.raises(luabridge.LuaError, match="max-normalize mode is not supported"):
        module("nn.IndexLinear(6, 2, false, nil, nil, nil, true)")
