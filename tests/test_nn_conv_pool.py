"""Max and average pooling (Spatial, SpatialDilated, Volumetric) against numpy float64 window
loops written from torch7's rules: floor/ceil output sizes, a last window starting in the
padding dropped, padding ignored by max, counted (count_include_pad) or not by average."""
import math

import numpy as np
import pytest

import luabridge
from nn_conv_helpers import F, N, T, backward, fd_check, field, forward, lua_fn, module, pytorch


def out_size(n, k, d, pad, dil, ceil):
    span = dil * (k - 1) + 1
    o = (math.ceil if ceil else math.floor)((n - span + 2 * pad) / d) + 1
    if pad and (o - 1) * d >= n + pad:
        o -= 1
    return o


def windows(shape, k, d, pad, dil, ceil):
    """For each output position (tuple), the list of in-image index tuples of its window, and
    the padded window's element count (clipped at the padded border)."""
    outs = [out_size(n, *a, ceil) for n, *a in zip(shape, k, d, pad, dil)]
    for pos in np.ndindex(*outs):
        axes, padded = [], 1
        for o, n, kk, dd, pp, ll in zip(pos, shape, k, d, pad, dil):
            start = o * dd - pp
            axes.append([start + i * ll for i in range(kk) if 0 <= start + i * ll < n])
            padded *= min(start + kk, n + pp) - start
        yield pos, list(np.ndindex(*[len(a) for a in axes])), axes, padded, outs


def pool_ref(x, k, d, pad, dil=None, ceil=False, kind="max", count_pad=True, divide=True):
    """x: (planes, *spatial); returns output (and 1-based flat indices for max)."""
    sd = len(k)
    dil = dil or (1,) * sd
    shape = x.shape[1:]
    items = list(windows(shape, k, d, pad, dil, ceil))
    outs = items[0][4]
    out = np.zeros((x.shape[0], *outs))
    idx = np.zeros_like(out, dtype=np.int64)
    for pos, picks, axes, padded, _ in items:
        taps = [tuple(a[i] for a, i in zip(axes, p)) for p in picks]
        vals = np.array([x[(slice(None),) + t] for t in taps])   # taps x planes
        if kind == "max":
            best = vals.argmax(axis=0)
            out[(slice(None),) + pos] = vals.max(axis=0)
            flat = [np.ravel_multi_index(t, shape) + 1 for t in taps]
            idx[(slice(None),) + pos] = np.array(flat)[best]
        else:
            n = padded if count_pad else len(taps)
            if not divide:
                n = n / np.prod(k)
            out[(slice(None),) + pos] = vals.sum(axis=0) / n
    return out, idx


SPATIAL_MAX = [  # kW, kH, dW, dH, padW, padH, ceil, H, W
    (2, 2, 2, 2, 0, 0, False, 6, 8),
    (3, 2, 2, 1, 1, 1, True, 7, 6),
    (3, 3, 2, 2, 1, 0, True, 8, 7),
    (2, 3, 3, 2, 0, 1, False, 5, 9),
]


@pytest.mark.parametrize("case", SPATIAL_MAX)
@pytest.mark.parametrize("batch", [0, 2])
def test_spatial_max_pooling(lua, rng, case, batch):
    kW, kH, dW, dH, pW, pH, ceil, H, W = case
    m = module(f"nn.SpatialMaxPooling({kW}, {kH}, {dW}, {dH}, {pW}, {pH})" + (":ceil()" if ceil else ""))
    x = rng.standard_normal((max(batch, 1) * 3, H, W))
    want, widx = pool_ref(x, (kH, kW), (dH, dW), (pH, pW), ceil=ceil)
    xin = x if batch == 0 else x.reshape(batch, 3, H, W)
    got = N(forward(m, T(xin)))
    np.testing.assert_array_equal(got.reshape(want.shape), want)
    np.testing.assert_array_equal(N(field(m, "indices")).reshape(want.shape), widx)
    fd_check(m, xin, params=(), rng=rng)


@pytest.mark.parametrize("case", [(3, 3, 1, 1, 1, 1, 2, 2, False), (2, 3, 2, 1, 1, 1, 2, 1, True)])
def test_spatial_dilated_max_pooling(lua, rng, case):
    kW, kH, dW, dH, pW, pH, lW, lH, ceil = case
    m = module(f"nn.SpatialDilatedMaxPooling({kW}, {kH}, {dW}, {dH}, {pW}, {pH}, {lW}, {lH})" + (":ceil()" if ceil else ""))
    x = rng.standard_normal((2, 2, 9, 8))
    want, _ = pool_ref(x.reshape(4, 9, 8), (kH, kW), (dH, dW), (pH, pW), (lH, lW), ceil)
    np.testing.assert_array_equal(N(forward(m, T(x))).reshape(want.shape), want)
    fd_check(m, x, params=(), rng=rng)
    if pytorch is not None:
        t = F.max_pool2d(pytorch.tensor(x), (kH, kW), (dH, dW), (pH, pW), (lH, lW), ceil_mode=ceil)
        np.testing.assert_array_equal(N(forward(m, T(x))), t.numpy())


AVG = [  # kW, kH, dW, dH, padW, padH, ceil, count_pad, divide
    (2, 2, 2, 2, 0, 0, False, True, True),
    (3, 3, 2, 2, 1, 1, True, True, True),
    (3, 3, 2, 2, 1, 1, True, False, True),
    (3, 2, 1, 2, 1, 1, False, False, False),
    (2, 3, 3, 2, 1, 0, True, True, False),
]


@pytest.mark.parametrize("case", AVG)
def test_spatial_average_pooling(lua, rng, case):
    kW, kH, dW, dH, pW, pH, ceil, count_pad, divide = case
    expr = f"nn.SpatialAveragePooling({kW}, {kH}, {dW}, {dH}, {pW}, {pH})"
    expr += (":ceil()" if ceil else "") + ("" if count_pad else ":setCountExcludePad()")
    m = module(expr)
    if not divide:
        lua_fn("function(m) m.divide = false end")(m)
    x = rng.standard_normal((2, 3, 7, 8))
    want, _ = pool_ref(x.reshape(6, 7, 8), (kH, kW), (dH, dW), (pH, pW), ceil=ceil, kind="avg",
                       count_pad=count_pad, divide=divide)
    np.testing.assert_allclose(N(forward(m, T(x))).reshape(want.shape), want, atol=1e-12)
    np.testing.assert_allclose(N(forward(m, T(x[0]))).reshape(-1), want[:3].reshape(-1), atol=1e-12)
    fd_check(m, x, params=(), rng=rng)
    if pytorch is not None and divide and not ceil:
        t = F.avg_pool2d(pytorch.tensor(x), (kH, kW), (dH, dW), (pH, pW), count_include_pad=count_pad)
        np.testing.assert_allclose(N(forward(m, T(x))), t.numpy(), atol=1e-12)


def test_volumetric_pooling(lua, rng):
    x = rng.standard_normal((2, 2, 5, 6, 7))
    m = module("nn.VolumetricMaxPooling(2, 3, 2, 2, 2, 1, 1, 1, 0)")   # kT kW kH dT dW dH padT padW padH
    want, widx = pool_ref(x.reshape(4, 5, 6, 7), (2, 2, 3), (2, 1, 2), (1, 0, 1))
    np.testing.assert_array_equal(N(forward(m, T(x))).reshape(want.shape), want)
    np.testing.assert_array_equal(N(field(m, "indices")).reshape(want.shape), widx)
    fd_check(m, x, params=(), rng=rng)
    a = module("nn.VolumetricAveragePooling(2, 3, 2, 1, 2, 2)")
    want, _ = pool_ref(x.reshape(4, 5, 6, 7), (2, 2, 3), (1, 2, 2), (0, 0, 0), kind="avg")
    np.testing.assert_allclose(N(forward(a, T(x))).reshape(want.shape), want, atol=1e-12)
    np.testing.assert_allclose(N(forward(a, T(x[1]))).reshape(-1), want[2:].reshape(-1), atol=1e-12)
    fd_check(a, x[0], params=(), rng=rng)


def test_pooling_errors(lua):
    m = module("nn.SpatialMaxPooling(3, 3, 2, 2)")
    with pytest.raises(luabridge.LuaError, match=r"nn.SpatialMaxPooling: input of size 2x2x5 is too small for kernel 3x3"):
        forward(m, T(np.zeros((2, 2, 5))))
    with pytest.raises(luabridge.LuaError, match=r"nn.SpatialMaxPooling: expected 3D .* got 2D input of size 4x4"):
        forward(m, T(np.zeros((4, 4))))
    with pytest.raises(luabridge.LuaError, match=r"gradOutput of size 1x3x3 does not match the output size 1x2x2"):
        backward(m, T(np.zeros((1, 5, 5))), T(np.zeros((1, 3, 3))))
    with pytest.raises(luabridge.LuaError, match=r"nn.SpatialAveragePooling: padding must be at most half the kernel size"):
        forward(module("nn.SpatialAveragePooling(2, 2, 1, 1, 2, 0)"), T(np.zeros((1, 5, 5))))
    with pytest.raises(luabridge.LuaError, match=r"nn.VolumetricMaxPooling: expected 4D .* got 3D"):
        forward(module("nn.VolumetricMaxPooling(2, 2, 2)"), T(np.zeros((3, 4, 4))))
    s = lua_fn("function(m) return tostring(m) end")
    assert s(module("nn.SpatialMaxPooling(3, 2, 1, 1, 1, 1)")) == "nn.SpatialMaxPooling(3x2, 1,1, 1,1)"


PADS = [(1, 2, 0, 3), (2, 2, 2, 2), (-1, 2, 1, -2), (0, -1, -1, 0)]


@pytest.mark.parametrize("mode,np_mode", [("Zero", "constant"), ("Reflection", "reflect"), ("Replication", "edge")])
@pytest.mark.parametrize("pads", PADS)
def test_spatial_padding(lua, rng, mode, np_mode, pads):
    l, r, t, b = pads
    m = module(f"nn.Spatial{mode}Padding({l}, {r}, {t}, {b})")
    x = rng.standard_normal((2, 3, 5, 6))
    padded = np.pad(x, [(0, 0), (0, 0), (max(t, 0), max(b, 0)), (max(l, 0), max(r, 0))], mode=np_mode)
    H, W = padded.shape[2:]
    want = padded[:, :, max(-t, 0):H - max(-b, 0), max(-l, 0):W - max(-r, 0)]
    np.testing.assert_array_equal(N(forward(m, T(x))), want)
    np.testing.assert_array_equal(N(forward(m, T(x[1]))), want[1])
    fd_check(m, x, params=(), rng=rng)


def test_padding_defaults_and_errors(lua):
    m = module("nn.SpatialZeroPadding(2)")
    assert lua_fn("function(m) return tostring(m) end")(m) == "nn.SpatialZeroPadding(l=2, r=2, t=2, b=2)"
    with pytest.raises(luabridge.LuaError, match=r"nn.SpatialZeroPadding: input of size 1x3x3 is too small for padding l=-2, r=-1"):
        forward(module("nn.SpatialZeroPadding(-2, -1, 0, 0)"), T(np.zeros((1, 3, 3))))
    with pytest.raises(luabridge.LuaError, match=r"nn.SpatialReflectionPadding: padding \(l=3, r=3, t=3, b=3\) must be smaller than the input planes \(3x3\)"):
        forward(module("nn.SpatialReflectionPadding(3)"), T(np.zeros((1, 3, 3))))
    with pytest.raises(luabridge.LuaError, match=r"nn.SpatialReplicationPadding: expected 3D .* got 5D"):
        forward(module("nn.SpatialReplicationPadding(1)"), T(np.zeros((1, 1, 1, 3, 3))))


def adaptive_ref(x, oH, oW, kind):
    H, W = x.shape[-2:]
    out = np.zeros(x.shape[:-2] + (oH, oW))
    for i in range(oH):
        for j in range(oW):
            y0, y1 = (i * H) // oH, -((-(i + 1) * H) // oH)
            x0, x1 = (j * W) // oW, -((-(j + 1) * W) // oW)
            win = x[..., y0:y1, x0:x1]
            out[..., i, j] = win.max(axis=(-2, -1)) if kind == "max" else win.mean(axis=(-2, -1))
    return out


@pytest.mark.parametrize("kind,cls", [("max", "SpatialAdaptiveMaxPooling"), ("avg", "SpatialAdaptiveAveragePooling")])
@pytest.mark.parametrize("sizes", [(3, 2, 7, 5), (4, 4, 4, 4), (5, 3, 3, 11)])
def test_adaptive_pooling(lua, rng, kind, cls, sizes):
    oW, oH, H, W = sizes
    m = module(f"nn.{cls}({oW}, {oH})")
    x = rng.standard_normal((2, 3, H, W))
    want = adaptive_ref(x, oH, oW, kind)
    np.testing.assert_allclose(N(forward(m, T(x))), want, atol=1e-12)
    np.testing.assert_allclose(N(forward(m, T(x[1]))), want[1], atol=1e-12)
    fd_check(m, x, params=(), rng=rng)
    if pytorch is not None:
        f = F.adaptive_max_pool2d if kind == "max" else F.adaptive_avg_pool2d
        np.testing.assert_allclose(N(forward(m, T(x))), f(pytorch.tensor(x), (oH, oW)).numpy(), atol=1e-12)


def test_max_unpooling(lua, rng):
    setup = lua_fn("function() require 'nn'; local p = nn.SpatialMaxPooling(2, 3); return p, nn.SpatialMaxUnpooling(p) end")
    p, u = setup()
    x = rng.standard_normal((2, 3, 6, 5))
    y = N(forward(p, T(x)))
    out = N(forward(u, T(y)))
    assert out.shape == x.shape
    pooled_back = np.where(out != 0, x, 0)   # values sit where they came from
    np.testing.assert_array_equal(out, pooled_back)
    np.testing.assert_array_equal(np.sort(out[out != 0]), np.sort(y.reshape(-1)))
    assert not out[..., :, 4:].any()   # the column no window covers
    g = rng.standard_normal(x.shape)
    gin = N(backward(u, T(y), T(g)))
    idx = N(field(p, "indices")) - 1
    planes = g.reshape(6, 30)
    np.testing.assert_array_equal(gin.reshape(6, -1), np.take_along_axis(planes, idx.reshape(6, -1), axis=1))
    with pytest.raises(luabridge.LuaError, match=r"nn.SpatialMaxUnpooling: the pooling module's kernel \(3x3\) must equal its stride \(1,1\)"):
        module("nn.SpatialMaxUnpooling(nn.SpatialMaxPooling(3, 3, 1, 1))")
    with pytest.raises(luabridge.LuaError, match=r"nn.SpatialMaxUnpooling: input of size 2x3x3x2 does not match the indices"):
        forward(u, T(np.zeros((2, 3, 3, 2))))


def test_spatial_subsampling(lua, rng):
    m = module("nn.SpatialSubSampling(3, 3, 2, 2, 1)")   # nInputPlane kW kH dW dH
    w, b = N(field(m, "weight")), N(field(m, "bias"))
    x = rng.standard_normal((2, 3, 6, 7))
    sums, _ = pool_ref(x.reshape(6, 6, 7), (2, 3), (1, 2), (0, 0), kind="avg", divide=False)
    want = sums.reshape(2, 3, 5, 3) * w[None, :, None, None] + b[None, :, None, None]
    np.testing.assert_allclose(N(forward(m, T(x))), want, atol=1e-12)
    np.testing.assert_allclose(N(forward(m, T(x[1]))), want[1], atol=1e-12)
    fd_check(m, x, rng=rng)
    with pytest.raises(luabridge.LuaError, match=r"nn.SpatialSubSampling: expected input with 3 planes, got 2"):
        forward(m, T(np.zeros((2, 6, 7))))


def test_volumetric_dilated_max_pooling(lua, rng):
    m = module("nn.VolumetricDilatedMaxPooling(2, 2, 3, 1, 2, 1, 0, 1, 1, 2, 1, 2)")
    x = rng.standard_normal((3, 6, 7, 8))
    want, widx = pool_ref(x, (2, 3, 2), (1, 1, 2), (0, 1, 1), (2, 2, 1))
    np.testing.assert_array_equal(N(forward(m, T(x))), want)
    np.testing.assert_array_equal(N(field(m, "indices")), widx)
    fd_check(m, x, params=(), rng=rng)


def test_volumetric_replication_padding(lua, rng):
    m = module("nn.VolumetricReplicationPadding(1, 2, 0, -1, 2, 1)")   # left right top bottom front back
    x = rng.standard_normal((2, 2, 3, 4, 5))
    padded = np.pad(x, [(0, 0), (0, 0), (2, 1), (0, 0), (1, 2)], mode="edge")[:, :, :, :-1, :]
    np.testing.assert_array_equal(N(forward(m, T(x))), padded)
    np.testing.assert_array_equal(N(forward(m, T(x[0]))), padded[0])
    fd_check(m, x, params=(), rng=rng)
    assert lua_fn("function(m) return tostring(m) end")(m) == \
        "nn.VolumetricReplicationPadding(left=1, right=2, top=0, bottom=-1, front=2, back=1)"


def test_volumetric_max_unpooling(lua, rng):
    setup = lua_fn("function() require 'nn'; local p = nn.VolumetricMaxPooling(2, 2, 2); return p, nn.VolumetricMaxUnpooling(p) end")
    p, u = setup()
    x = rng.standard_normal((2, 4, 5, 4))
    y = N(forward(p, T(x)))
    out = N(forward(u, T(y)))
    assert out.shape == x.shape
    idx = N(field(p, "indices")).reshape(2, -1) - 1
    want = np.zeros((2, 80))
    np.put_along_axis(want, idx, y.reshape(2, -1), axis=1)
    np.testing.assert_array_equal(out.reshape(2, -1), want)
    g = rng.standard_normal(x.shape)
    gin = N(backward(u, T(y), T(g)))
    np.testing.assert_array_equal(gin.reshape(2, -1), np.take_along_axis(g.reshape(2, -1), idx, axis=1))


@pytest.mark.parametrize("p", [2, 3])
def test_lp_pooling(lua, rng, p):
    m = module(f"nn.SpatialLPPooling(3, {p}, 2, 3, 2, 1)")   # nInputPlane pnorm kW kH dW dH
    x = rng.uniform(0.5, 2.0, (2, 3, 7, 6))
    sums, _ = pool_ref((x ** p).reshape(6, 7, 6), (3, 2), (1, 2), (0, 0), kind="avg", divide=False)
    want = (sums ** (1 / p)).reshape(2, 3, 5, 3)
    np.testing.assert_allclose(N(forward(m, T(x))), want, atol=1e-12)
    fd_check(m, x, params=(), rng=rng)
    if pytorch is not None:
        t = F.lp_pool2d(pytorch.tensor(x), p, (3, 2), (1, 2))
        np.testing.assert_allclose(N(forward(m, T(x))), t.numpy(), atol=1e-10)
