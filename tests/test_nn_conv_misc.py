"""Upsampling (nearest, bilinear), SpatialCrossMapLRN, Temporal and Volumetric modules against
numpy float64 references, finite differences and errors."""
import numpy as np
import pytest

import luabridge
from nn_conv_helpers import F, N, T, backward, call, fd_check, field, forward, lua_fn, module, pytorch


def bilinear_ref(x, oH, oW):
    H, W = x.shape[-2:]
    out = np.zeros(x.shape[:-2] + (oH, oW))
    for y in range(oH):
        yr = y * (H - 1) / (oH - 1) if oH > 1 else 0.0
        y0 = int(np.floor(yr)); y1 = min(y0 + 1, H - 1); ly = yr - y0
        for xx in range(oW):
            xr = xx * (W - 1) / (oW - 1) if oW > 1 else 0.0
            x0 = int(np.floor(xr)); x1 = min(x0 + 1, W - 1); lx = xr - x0
            out[..., y, xx] = ((1 - ly) * ((1 - lx) * x[..., y0, x0] + lx * x[..., y0, x1])
                               + ly * ((1 - lx) * x[..., y1, x0] + lx * x[..., y1, x1]))
    return out


def test_upsampling_nearest(lua, rng):
    m = module("nn.SpatialUpSamplingNearest(3)")
    x = rng.standard_normal((2, 3, 4, 5))
    want = x.repeat(3, axis=2).repeat(3, axis=3)
    np.testing.assert_array_equal(N(forward(m, T(x))), want)
    np.testing.assert_array_equal(N(forward(m, T(x[0]))), want[0])
    fd_check(m, x, params=(), rng=rng)
    with pytest.raises(luabridge.LuaError, match=r"nn.SpatialUpSamplingNearest: scale_factor must be positive integers, got 1.5"):
        module("nn.SpatialUpSamplingNearest(1.5)")


@pytest.mark.parametrize("arg,size", [("2", (8, 10)), ("{oheight = 7, owidth = 3}", (7, 3)), ("{oheight = 1, owidth = 6}", (1, 6))])
def test_upsampling_bilinear(lua, rng, arg, size):
    m = module(f"nn.SpatialUpSamplingBilinear({arg})")
    x = rng.standard_normal((2, 3, 4, 5))
    want = bilinear_ref(x, *size)
    np.testing.assert_allclose(N(forward(m, T(x))), want, atol=1e-12)
    np.testing.assert_allclose(N(forward(m, T(x[1]))), want[1], atol=1e-12)
    fd_check(m, x, params=(), rng=rng)
    if pytorch is not None and size[0] > 1:
        t = F.interpolate(pytorch.tensor(x), size=size, mode="bilinear", align_corners=True)
        np.testing.assert_allclose(N(forward(m, T(x))), t.numpy(), atol=1e-12)


def lrn_ref(x, size, alpha, beta, k):
    C = x.shape[1]
    pre = (size - 1) // 2
    post = size - 1 - pre
    sq = x ** 2
    scale = np.stack([sq[:, max(0, c - pre):min(C, c + post + 1)].sum(axis=1) for c in range(C)], axis=1)
    return x * (k + alpha / size * scale) ** -beta


@pytest.mark.parametrize("size,alpha,beta,k", [(5, 0.0001, 0.75, 1), (3, 0.5, 0.6, 2), (4, 1.0, 1.5, 1.5), (1, 2.0, 0.5, 1)])
def test_cross_map_lrn(lua, rng, size, alpha, beta, k):
    m = module(f"nn.SpatialCrossMapLRN({size}, {alpha}, {beta}, {k})")
    x = rng.standard_normal((2, 6, 3, 4))
    want = lrn_ref(x, size, alpha, beta, k)
    np.testing.assert_allclose(N(forward(m, T(x))), want, atol=1e-12)
    np.testing.assert_allclose(N(forward(m, T(x[1]))), want[1], atol=1e-12)
    fd_check(m, x, params=(), rng=rng)
    if pytorch is not None and size % 2 == 1:
        t = F.local_response_norm(pytorch.tensor(x), size, alpha, beta, k)
        np.testing.assert_allclose(N(forward(m, T(x))), t.numpy(), atol=1e-12)


def windows_ref(x, kW, dW):
    """(..., frames, F) -> (..., nOF, kW, F): the kW-frame windows every dW frames."""
    nOF = (x.shape[-2] - kW) // dW + 1
    return np.stack([x[..., t * dW:t * dW + kW, :] for t in range(nOF)], axis=-3)


@pytest.mark.parametrize("case", [(4, 3, 3, 1, 9), (2, 5, 2, 3, 8), (3, 2, 4, 2, 4)])
def test_temporal_convolution(lua, rng, case):
    F_in, F_out, kW, dW, frames = case
    m = module(f"nn.TemporalConvolution({F_in}, {F_out}, {kW}, {dW})")
    w, b = N(field(m, "weight")), N(field(m, "bias"))
    assert w.shape == (F_out, F_in * kW)
    x = rng.standard_normal((2, frames, F_in))
    win = windows_ref(x, kW, dW).reshape(2, -1, kW * F_in)
    want = win @ w.T + b
    np.testing.assert_allclose(N(forward(m, T(x))), want, atol=1e-12)
    np.testing.assert_allclose(N(forward(m, T(x[1]))), want[1], atol=1e-12)
    fd_check(m, x, rng=rng)
    fd_check(m, x[0], rng=rng)
    with pytest.raises(luabridge.LuaError, match=rf"nn.TemporalConvolution: expected frames of {F_in} features, got 7"):
        forward(m, T(np.zeros((frames, 7))))
    short = module(f"nn.TemporalConvolution({F_in}, {F_out}, 5)")
    with pytest.raises(luabridge.LuaError, match=rf"nn.TemporalConvolution: input of size 4x{F_in} has 4 frames, fewer than the kernel width 5"):
        forward(short, T(np.zeros((4, F_in))))

def test_temporal_subsampling_and_max_pooling(lua, rng):
    m = module("nn.TemporalSubSampling(3, 3, 2)")
    w, b = N(field(m, "weight")), N(field(m, "bias"))
    x = rng.standard_normal((10, 3))
    np.testing.assert_allclose(N(forward(m, T(x))), b + w * windows_ref(x, 3, 2).sum(axis=-2), atol=1e-12)
    fd_check(m, x, rng=rng)
    with pytest.raises(luabridge.LuaError, match=r"nn.TemporalSubSampling: expected 2D \(frames x features\) input, got 3D"):
        forward(m, T(np.zeros((2, 10, 3))))
    p = module("nn.TemporalMaxPooling(3, 2)")
    xb = rng.standard_normal((2, 9, 4))
    np.testing.assert_array_equal(N(forward(p, T(xb))), windows_ref(xb, 3, 2).max(axis=-2))
    np.testing.assert_array_equal(N(forward(p, T(xb[0]))), windows_ref(xb[0], 3, 2).max(axis=-2))
    fd_check(p, xb, params=(), rng=rng)
    if pytorch is not None:
        t = F.max_pool1d(pytorch.tensor(xb).transpose(1, 2), 3, 2).transpose(1, 2)
        np.testing.assert_array_equal(N(forward(p, T(xb))), t.numpy())


FLOAT_CASES = [  # module expression, input shape
    ("nn.SpatialConvolution(2, 3, 3, 3, 1, 1, 1, 1)", (2, 2, 6, 6)),
    ("nn.SpatialFullConvolution(2, 3, 3, 3, 2, 2, 1, 1, 1, 1)", (2, 2, 4, 4)),
    ("nn.SpatialDilatedConvolution(2, 3, 3, 3, 1, 1, 2, 2, 2, 2)", (2, 2, 7, 7)),
    ("nn.SpatialConvolutionLocal(2, 3, 6, 6, 3, 3)", (2, 2, 6, 6)),
    ("nn.VolumetricConvolution(2, 2, 2, 2, 2)", (2, 2, 3, 4, 4)),
    ("nn.VolumetricFullConvolution(2, 2, 2, 2, 2)", (2, 2, 3, 3, 3)),
    ("nn.SpatialMaxPooling(3, 3, 2, 2, 1, 1):ceil()", (2, 3, 7, 7)),
    ("nn.SpatialMaxPooling(2, 2)", (2, 3, 6, 6)),
    ("nn.SpatialAveragePooling(3, 3, 2, 2, 1, 1)", (2, 3, 7, 7)),
    ("nn.SpatialSubSampling(3, 2, 2, 2, 2)", (2, 3, 6, 6)),
    ("nn.VolumetricMaxPooling(2, 2, 2)", (2, 2, 4, 4, 4)),
    ("nn.VolumetricAveragePooling(2, 2, 2)", (2, 2, 4, 4, 4)),
    ("nn.SpatialAdaptiveMaxPooling(3, 2)", (2, 3, 7, 5)),
    ("nn.SpatialAdaptiveAveragePooling(3, 2)", (2, 3, 7, 5)),
    ("nn.SpatialReflectionPadding(1, 2, 2, 1)", (2, 3, 4, 4)),
    ("nn.SpatialBatchNormalization(3)", (4, 3, 3, 3)),
    ("nn.SpatialCrossMapLRN(3)", (2, 4, 3, 3)),
    ("nn.SpatialUpSamplingBilinear(2)", (2, 3, 3, 4)),
    ("nn.SpatialUpSamplingNearest(2)", (2, 3, 3, 4)),
    ("nn.TemporalConvolution(3, 4, 3, 2)", (2, 9, 3)),
    ("nn.TemporalMaxPooling(2)", (2, 8, 3)),
    ("nn.SpatialContrastiveNormalization(3, torch.ones(3, 3))", (2, 3, 6, 6)),
    ("nn.SpatialLPPooling(3, 2, 2, 2)", (2, 3, 6, 6)),
]


@pytest.mark.parametrize("expr,shape", FLOAT_CASES)
def test_float_matches_double(lua, rng, expr, shape):
    """The Float loops agree with the Double ones (same parameters) forward and backward."""
    md = module(expr)
    mf = lua_fn("function(m) return m:clone():float() end")(md)
    x = rng.standard_normal(shape)
    yd = N(forward(md, T(x)))
    yf = N(forward(mf, T(x.astype(np.float32))))
    assert yf.dtype == np.float32
    np.testing.assert_allclose(yf, yd, rtol=1e-4, atol=1e-4)
    g = rng.standard_normal(yd.shape)
    gd = N(backward(md, T(x), T(g)))
    gf = N(backward(mf, T(x.astype(np.float32)), T(g.astype(np.float32))))
    np.testing.assert_allclose(gf, gd, rtol=1e-3, atol=1e-3)
