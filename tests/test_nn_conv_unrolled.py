"""The loops generated per geometry for 2D convolution and max pooling without padding or
dilation (backend/cpu/unfold.lua, nn_pool.lua): forward, gradInput, gradWeight, indices (with ties)
against numpy float64 loops, with strides, LeNet's shapes, and the limits of the unrolling."""
import numpy as np
import pytest

import luabridge
from nn_conv_helpers import N, T, backward, field, forward, lua_fn, module


def conv_grads_ref(x, w, g, stride):
    """gradInput and gradWeight of out[n,o,y,x] = sum w[o,c,i,j] * x[n,c,y*dH+i,x*dW+j]."""
    dH, dW = stride
    o, c, kH, kW = w.shape
    gi, gw = np.zeros_like(x), np.zeros_like(w)
    for yy in range(g.shape[2]):
        for xx in range(g.shape[3]):
            win = (slice(None), slice(None), slice(yy * dH, yy * dH + kH), slice(xx * dW, xx * dW + kW))
            gi[win] += np.einsum("no,ocij->ncij", g[:, :, yy, xx], w)
            gw += np.einsum("no,ncij->ocij", g[:, :, yy, xx], x[win])
    return gi, gw


def conv_ref(x, w, b, stride):
    dH, dW = stride
    o, c, kH, kW = w.shape
    oH, oW = (x.shape[2] - kH) // dH + 1, (x.shape[3] - kW) // dW + 1
    out = np.empty((x.shape[0], o, oH, oW))
    for yy in range(oH):
        for xx in range(oW):
            out[:, :, yy, xx] = np.einsum("ncij,ocij->no",
                                          x[:, :, yy * dH:yy * dH + kH, xx * dW:xx * dW + kW], w)
    return out + b[None, :, None, None]


CASES = [  # nIn, nOut, kW, kH, dW, dH, H, W, batch
    (1, 6, 5, 5, 1, 1, 12, 12, 3),    # oW 8
    (3, 4, 3, 2, 2, 1, 7, 9, 2),      # strides
    (2, 3, 2, 3, 3, 2, 9, 20, 2),     # oW 7, stride 3
    (6, 16, 5, 5, 1, 1, 12, 12, 4),   # LeNet's second convolution
    (2, 2, 3, 3, 1, 1, 5, 18, 1),     # kW * oW = 48, the longest unrolled row
    (1, 2, 3, 3, 1, 1, 5, 19, 2),     # 51: col2im's general loop; im2col's rows (408 bytes) unrolled
    (1, 2, 3, 3, 1, 1, 5, 30, 2),     # 84 (672 bytes): the general loops
    (1, 3, 5, 5, 1, 1, 28, 28, 2),    # LeNet's first convolution (float: unrolled im2col rows)
    (1, 2, 3, 3, 1, 1, 11, 6, 2),     # 9 output rows, im2col copies 3 a step
]


@pytest.mark.parametrize("case", CASES)
def test_unrolled_matches_numpy(lua, rng, case):
    nIn, nOut, kW, kH, dW, dH, H, W, batch = case
    m = module(f"nn.SpatialConvolution({nIn}, {nOut}, {kW}, {kH}, {dW}, {dH})")
    w = N(field(m, "weight")).reshape(nOut, nIn, kH, kW)
    b = N(field(m, "bias"))
    x = rng.standard_normal((batch, nIn, H, W))
    out = N(forward(m, T(x)))
    np.testing.assert_allclose(out, conv_ref(x, w, b, (dH, dW)), atol=1e-12)
    g = rng.standard_normal(out.shape)
    gi, gw = conv_grads_ref(x, w, g, (dH, dW))
    np.testing.assert_allclose(N(backward(m, T(x), T(g))), gi, atol=1e-12)
    np.testing.assert_allclose(N(field(m, "gradWeight")), gw, atol=1e-12)
    # a single (3D) image takes the same path
    np.testing.assert_allclose(N(forward(m, T(x[0]))), conv_ref(x[:1], w, b, (dH, dW))[0], atol=1e-12)


def test_lenet_float32(lua, rng):
    m = module("nn.SpatialConvolution(1, 6, 5, 5):float()")
    w = N(field(m, "weight")).astype(np.float64)
    b = N(field(m, "bias")).astype(np.float64)
    x = rng.standard_normal((5, 1, 28, 28)).astype(np.float32)
    out = N(forward(m, T(x)))
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, conv_ref(x.astype(np.float64), w, b, (1, 1)), atol=1e-5)


@pytest.mark.parametrize("dtype,atol", [(np.float32, 1e-4), (np.float64, 1e-12)])
def test_lenet_shapes_both_types(lua, rng, dtype, atol):
    """LeNet's first convolution: float rows (5 x 24 floats) unroll in im2col, double ones
    (960 bytes) take the general loop; both against numpy float64, over several steps (the
    rows of ones kept between calls)."""
    m = module("nn.SpatialConvolution(1, 6, 5, 5)" + (":float()" if dtype == np.float32 else ""))
    w = N(field(m, "weight")).astype(np.float64)
    b = N(field(m, "bias")).astype(np.float64)
    for batch in (3, 40, 3):
        x = rng.standard_normal((batch, 1, 28, 28)).astype(dtype)
        want = conv_ref(x.astype(np.float64), w, b, (1, 1))
        np.testing.assert_allclose(N(forward(m, T(x))), want, atol=atol * 10)
        g = rng.standard_normal(want.shape).astype(dtype)
        zero = lua_fn("function(m) m:zeroGradParameters() end")
        zero(m)
        gi, gw = conv_grads_ref(x.astype(np.float64), w, g.astype(np.float64), (1, 1))
        np.testing.assert_allclose(N(backward(m, T(x), T(g))), gi, atol=atol * 10)
        np.testing.assert_allclose(N(field(m, "gradWeight")), gw, atol=atol * 100)
        np.testing.assert_allclose(N(field(m, "gradBias")), g.astype(np.float64).sum(axis=(0, 2, 3)),
                                   atol=atol * 100)


def max_pool_ref(x, k, d):
    """x: planes x H x W; output, 1-based flat indices of each window's first maximum."""
    (kH, kW), (dH, dW) = k, d
    P, H, W = x.shape
    oH, oW = (H - kH) // dH + 1, (W - kW) // dW + 1
    out, idx = np.empty((P, oH, oW)), np.empty((P, oH, oW), dtype=np.int64)
    for y in range(oH):
        for xx in range(oW):
            win = x[:, y * dH:y * dH + kH, xx * dW:xx * dW + kW].reshape(P, -1)
            at = win.argmax(axis=1)   # the first maximum in window (row-major) order
            out[:, y, xx] = win.max(axis=1)
            idx[:, y, xx] = (y * dH + at // kW) * W + xx * dW + at % kW + 1
    return out, idx


POOLS = [  # kW, kH, dW, dH, H, W
    (2, 2, 2, 2, 24, 24),   # LeNet's first pooling
    (3, 3, 1, 1, 6, 7),     # overlapping windows
    (3, 2, 1, 2, 5, 9),
    (5, 5, 2, 3, 11, 12),   # 25 taps, the largest unrolled window
    (1, 1, 1, 1, 3, 4),
    (2, 2, 1, 1, 4, 18),    # 68 taps a row: a loop over unrolled windows
    (6, 5, 1, 1, 7, 8),     # 30 taps: the general loop
    (2, 2, 2, 2, 8, 8),     # LeNet's second pooling: two output rows a step
    (2, 2, 1, 1, 5, 5),     # overlapping windows, two output rows a step
]


@pytest.mark.parametrize("case", POOLS)
def test_unrolled_max_pooling_ties_and_gradient(lua, rng, case):
    kW, kH, dW, dH, H, W = case
    m = module(f"nn.SpatialMaxPooling({kW}, {kH}, {dW}, {dH})")
    # few distinct values: many ties, which must pick the first maximum in window order
    x = rng.integers(-2, 3, (2, 3, H, W)).astype(np.float64)
    want, widx = max_pool_ref(x.reshape(6, H, W), (kH, kW), (dH, dW))
    out = N(forward(m, T(x)))
    np.testing.assert_array_equal(out.reshape(want.shape), want)
    np.testing.assert_array_equal(N(field(m, "indices")).reshape(want.shape), widx)
    g = rng.standard_normal(out.shape)
    gi = np.zeros((6, H * W))
    for p in range(6):
        np.add.at(gi[p], widx[p].ravel() - 1, g.reshape(6, -1)[p])
    np.testing.assert_allclose(N(backward(m, T(x), T(g))), gi.reshape(x.shape), atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", POOLS[:4])
def test_max_pooling_infinities(lua, rng, dtype, case):
    """Windows holding infinities (and ties of them) give the first maximum's index, as finite
    ones: the unrolled windows' differences to an infinite maximum are NaN, handled apart."""
    kW, kH, dW, dH, H, W = case
    m = module(f"nn.SpatialMaxPooling({kW}, {kH}, {dW}, {dH})" + (":float()" if dtype == np.float32 else ""))
    x = rng.choice([-np.inf, -1.0, 0.0, 2.0, np.inf], (2, 3, H, W)).astype(dtype)
    x[0, 0] = -np.inf   # whole planes of one infinity
    x[0, 1] = np.inf
    want, widx = max_pool_ref(x.reshape(6, H, W).astype(np.float64), (kH, kW), (dH, dW))
    out = N(forward(m, T(x)))
    np.testing.assert_array_equal(out.reshape(want.shape), want)
    np.testing.assert_array_equal(N(field(m, "indices")).reshape(want.shape), widx)
    g = rng.standard_normal(out.shape).astype(dtype)
    gi = np.zeros((6, H * W))
    for p in range(6):
        np.add.at(gi[p], widx[p].ravel() - 1, g.reshape(6, -1)[p])
    np.testing.assert_allclose(N(backward(m, T(x), T(g))), gi.reshape(x.shape), atol=1e-6)


def test_max_pooling_backward_needs_forward(lua):
    m = module("nn.SpatialMaxPooling(2, 2)")
    grad = lua_fn("function(m, x, g) return m:updateGradInput(x, g) end")
    with pytest.raises(luabridge.LuaError, match=r"nn.SpatialMaxPooling: call updateOutput with this input before updateGradInput"):
        grad(m, T(np.ones((1, 4, 4))), T(np.ones((1, 2, 2))))
