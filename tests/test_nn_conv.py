"""nn.SpatialConvolution(MM) against a direct numpy float64 convolution, finite differences,
errors, and (when installed) PyTorch's conv2d."""
import numpy as np
import pytest

import luabridge
from nn_conv_helpers import (F, N, T, backward, call, fd_check, field, forward, lua_fn, module,
                             pytorch, view)


def conv2d_ref(x, w, b, stride, pad):
    """Direct loops: out[n, o, y, x] = b[o] + sum_{c,i,j} w[o, c, i, j] * xpad[n, c, y*dH+i, x*dW+j]."""
    (dH, dW), (pH, pW) = stride, pad
    xp = np.pad(x, [(0, 0), (0, 0), (pH, pH), (pW, pW)])
    n, c, H, W = xp.shape
    o, _, kH, kW = w.shape
    oH, oW = (H - kH) // dH + 1, (W - kW) // dW + 1
    out = np.zeros((n, o, oH, oW))
    for yy in range(oH):
        for xx in range(oW):
            patch = xp[:, :, yy * dH:yy * dH + kH, xx * dW:xx * dW + kW]
            out[:, :, yy, xx] = np.einsum("ncij,ocij->no", patch, w)
    return out + (0 if b is None else b[None, :, None, None])


CASES = [  # nIn, nOut, kW, kH, dW, dH, padW, padH, H, W, batch
    (1, 6, 5, 5, 1, 1, 0, 0, 12, 12, 3),
    (3, 4, 3, 2, 2, 1, 1, 0, 7, 9, 2),
    (2, 3, 3, 3, 2, 3, 1, 2, 6, 5, 1),
    (4, 2, 1, 1, 1, 1, 0, 0, 3, 4, 0),
    (2, 5, 4, 3, 3, 2, 2, 1, 5, 5, 4),
]


def make_conv(cls, nIn, nOut, kW, kH, dW, dH, pW, pH):
    return module(f"nn.{cls}({nIn}, {nOut}, {kW}, {kH}, {dW}, {dH}, {pW}, {pH})")


def weights4d(m, nOut, nIn, kH, kW):
    return N(field(m, "weight")).reshape(nOut, nIn, kH, kW), N(field(m, "bias"))


@pytest.mark.parametrize("cls", ["SpatialConvolution", "SpatialConvolutionMM"])
@pytest.mark.parametrize("case", CASES)
def test_forward_matches_numpy(lua, rng, cls, case):
    nIn, nOut, kW, kH, dW, dH, pW, pH, H, W, batch = case
    m = make_conv(cls, nIn, nOut, kW, kH, dW, dH, pW, pH)
    w, b = weights4d(m, nOut, nIn, kH, kW)
    x = rng.standard_normal((max(batch, 1), nIn, H, W))
    want = conv2d_ref(x, w, b, (dH, dW), (pH, pW))
    if batch == 0:   # a single (3D) image
        np.testing.assert_allclose(N(forward(m, T(x[0]))), want[0], atol=1e-12)
    else:
        np.testing.assert_allclose(N(forward(m, T(x))), want, atol=1e-12)


def test_weight_layouts_and_defaults(lua):
    m = module("nn.SpatialConvolution(3, 5, 4, 2)")
    assert list(N(field(m, "weight")).shape) == [5, 3, 2, 4]
    assert (field(m, "dW"), field(m, "dH"), field(m, "padW"), field(m, "padH")) == (1, 1, 0, 0)
    mm = module("nn.SpatialConvolutionMM(3, 5, 4, 2, 1, 1, 2)")
    assert list(N(field(mm, "weight")).shape) == [5, 24]
    assert field(mm, "padH") == 2
    w = N(field(m, "weight"))
    bound = 1 / np.sqrt(3 * 4 * 2)
    assert np.abs(w).max() <= bound and np.abs(w).max() > bound / 2
    call(m, "reset", 0.5)
    assert np.abs(N(field(m, "weight"))).max() <= 0.5 * np.sqrt(3)
    s = lua_fn("function(m) return tostring(m) end")
    assert s(module("nn.SpatialConvolution(3, 5, 4, 2, 2, 2, 1, 1)")) == "nn.SpatialConvolution(3 -> 5, 4x2, 2,2, 1,1)"
    assert s(module("nn.SpatialConvolution(1, 2, 3, 3):noBias()")) == "nn.SpatialConvolution(1 -> 2, 3x3) without bias"


@pytest.mark.parametrize("case", CASES[1:4])
def test_gradients_finite_differences(lua, rng, case):
    nIn, nOut, kW, kH, dW, dH, pW, pH, H, W, batch = case
    m = make_conv("SpatialConvolution", nIn, nOut, kW, kH, dW, dH, pW, pH)
    shape = (nIn, H, W) if batch == 0 else (batch, nIn, H, W)
    fd_check(m, rng.standard_normal(shape), rng=rng)


def test_nobias_and_scale_accumulates(lua, rng):
    m = module("nn.SpatialConvolutionMM(2, 3, 3, 3, 1, 1, 1):noBias()")
    x = rng.standard_normal((2, 2, 5, 5))
    w = N(field(m, "weight")).reshape(3, 2, 3, 3)
    np.testing.assert_allclose(N(forward(m, T(x))), conv2d_ref(x, w, None, (1, 1), (1, 1)), atol=1e-12)
    fd_check(m, x, rng=rng)
    # accGradParameters adds scale * gradient to what is there
    g = rng.standard_normal((2, 3, 5, 5))
    backward(m, T(x), T(g))
    once = N(field(m, "gradWeight"))
    lua_fn("function(m, x, g) m:accGradParameters(x, g, 0.5) end")(m, T(x), T(g))
    np.testing.assert_allclose(N(field(m, "gradWeight")), 1.5 * once, atol=1e-12)


def test_noncontiguous_input_and_float(lua, rng):
    m = module("nn.SpatialConvolution(3, 2, 3, 3, 1, 2, 0, 1)")
    w, b = weights4d(m, 2, 3, 3, 3)
    x = rng.standard_normal((2, 7, 6, 3)).transpose(0, 3, 2, 1)   # 2x3x6x7, strided
    np.testing.assert_allclose(N(forward(m, T(x))), conv2d_ref(x, w, b, (2, 1), (1, 0)), atol=1e-12)
    fm = lua_fn("function(m) return m:float() end")(m)
    got = N(forward(fm, T(np.ascontiguousarray(x, dtype=np.float32))))
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, conv2d_ref(x, w, b, (2, 1), (1, 0)), atol=1e-4)


def test_errors(lua):
    m = module("nn.SpatialConvolution(3, 4, 3, 3)")
    with pytest.raises(luabridge.LuaError, match=r"nn.SpatialConvolution: expected input with 3 planes in dimension 2, got 2 \(input size 1x2x5x5\)"):
        forward(m, T(np.zeros((1, 2, 5, 5))))
    with pytest.raises(luabridge.LuaError, match=r"nn.SpatialConvolution: expected 3D .* got 2D input of size 5x5"):
        forward(m, T(np.zeros((5, 5))))
    with pytest.raises(luabridge.LuaError, match=r"nn.SpatialConvolution: input of size 3x2x5 is too small for kernel 3x3.*output would be 0x3"):
        forward(m, T(np.zeros((3, 2, 5))))
    with pytest.raises(luabridge.LuaError, match=r"nn.SpatialConvolution: gradOutput of size 4x2x2 does not match the output size 4x3x3"):
        backward(m, T(np.zeros((3, 5, 5))), T(np.zeros((4, 2, 2))))
    with pytest.raises(luabridge.LuaError, match=r"input is a torch.FloatTensor but the weight is a torch.DoubleTensor"):
        forward(m, T(np.zeros((3, 5, 5), np.float32)))
    with pytest.raises(luabridge.LuaError, match=r"nn.SpatialConvolution: expected a FloatTensor or DoubleTensor input, got torch.LongTensor"):
        forward(m, T(np.zeros((3, 5, 5), np.int64)))
    with pytest.raises(luabridge.LuaError, match=r"nn.SpatialConvolution: plane counts, kernel sizes and strides must be positive integers"):
        module("nn.SpatialConvolution(3, 4, 0, 3)")


@pytest.mark.skipif(pytorch is None, reason="PyTorch not installed")
def test_against_pytorch(lua, rng):
    m = module("nn.SpatialConvolution(3, 8, 5, 3, 2, 1, 2, 1)")
    x = rng.standard_normal((4, 3, 11, 10))
    w, b = weights4d(m, 8, 3, 3, 5)
    g = rng.standard_normal(N(forward(m, T(x))).shape)
    gin = N(backward(m, T(x), T(g)))
    xt = pytorch.tensor(x, requires_grad=True)
    wt = pytorch.tensor(w, requires_grad=True)
    bt = pytorch.tensor(b, requires_grad=True)
    yt = F.conv2d(xt, wt, bt, stride=(1, 2), padding=(1, 2))
    yt.backward(pytorch.tensor(g))
    np.testing.assert_allclose(N(forward(m, T(x))), yt.detach().numpy(), atol=1e-12)
    np.testing.assert_allclose(gin, xt.grad.numpy(), atol=1e-12)
    np.testing.assert_allclose(N(field(m, "gradWeight")), wt.grad.numpy(), atol=1e-12)
    np.testing.assert_allclose(N(field(m, "gradBias")), bt.grad.numpy(), atol=1e-12)


def dilate(w, lH, lW):
    o, c, kH, kW = w.shape
    big = np.zeros((o, c, lH * (kH - 1) + 1, lW * (kW - 1) + 1))
    big[:, :, ::lH, ::lW] = w
    return big


@pytest.mark.parametrize("case", [(2, 3, 3, 3, 1, 1, 1, 1, 2, 2), (3, 2, 2, 3, 2, 1, 2, 0, 3, 1)])
def test_dilated_convolution(lua, rng, case):
    nIn, nOut, kW, kH, dW, dH, pW, pH, lW, lH = case
    m = module(f"nn.SpatialDilatedConvolution({nIn}, {nOut}, {kW}, {kH}, {dW}, {dH}, {pW}, {pH}, {lW}, {lH})")
    w, b = weights4d(m, nOut, nIn, kH, kW)
    x = rng.standard_normal((2, nIn, 9, 8))
    want = conv2d_ref(x, dilate(w, lH, lW), b, (dH, dW), (pH, pW))
    np.testing.assert_allclose(N(forward(m, T(x))), want, atol=1e-12)
    np.testing.assert_allclose(N(forward(m, T(x[1]))), want[1], atol=1e-12)
    fd_check(m, x, rng=rng)
    if pytorch is not None:
        t = F.conv2d(pytorch.tensor(x), pytorch.tensor(w), pytorch.tensor(b), (dH, dW), (pH, pW), (lH, lW))
        np.testing.assert_allclose(N(forward(m, T(x))), t.numpy(), atol=1e-12)


def full_conv_ref(x, w, b, stride, pad, adj):
    """Each input pixel adds x * w[c] at (y*dH, x*dW) of a full output, cropped by the padding."""
    (dH, dW), (pH, pW), (aH, aW) = stride, pad, adj
    n, c, H, W = x.shape
    _, o, kH, kW = w.shape
    full = np.zeros((n, o, (H - 1) * dH + kH + aH, (W - 1) * dW + kW + aW))
    for y in range(H):
        for xx in range(W):
            full[:, :, y * dH:y * dH + kH, xx * dW:xx * dW + kW] += np.einsum("nc,coij->noij", x[:, :, y, xx], w)
    oH, oW = full.shape[2] - 2 * pH, full.shape[3] - 2 * pW
    return full[:, :, pH:pH + oH, pW:pW + oW] + b[None, :, None, None]


@pytest.mark.parametrize("case", [(2, 3, 3, 3, 1, 1, 0, 0, 0, 0), (3, 2, 3, 2, 2, 2, 1, 0, 1, 1),
                                  (1, 2, 4, 3, 3, 2, 1, 1, 2, 0)])
def test_full_convolution(lua, rng, case):
    nIn, nOut, kW, kH, dW, dH, pW, pH, aW, aH = case
    m = module(f"nn.SpatialFullConvolution({nIn}, {nOut}, {kW}, {kH}, {dW}, {dH}, {pW}, {pH}, {aW}, {aH})")
    w = N(field(m, "weight"))
    b = N(field(m, "bias"))
    assert w.shape == (nIn, nOut, kH, kW)
    x = rng.standard_normal((2, nIn, 4, 5))
    want = full_conv_ref(x, w, b, (dH, dW), (pH, pW), (aH, aW))
    np.testing.assert_allclose(N(forward(m, T(x))), want, atol=1e-12)
    np.testing.assert_allclose(N(forward(m, T(x[0]))), want[0], atol=1e-12)
    fd_check(m, x, rng=rng)
    if pytorch is not None:
        t = F.conv_transpose2d(pytorch.tensor(x), pytorch.tensor(w), pytorch.tensor(b), (dH, dW), (pH, pW), (aH, aW))
        np.testing.assert_allclose(N(forward(m, T(x))), t.numpy(), atol=1e-12)


def test_full_convolution_target_size(lua, rng):
    m = module("nn.SpatialFullConvolution(2, 3, 3, 3, 2, 2, 1, 1)")
    x = rng.standard_normal((2, 4, 4))
    got = lua_fn("function(m, x, t) local y = m:forward({x, t}); local g = m:backward({x, t}, y:clone()); return y, g[1], g[2] end")
    y, gx, gt = got(m, T(x), T(np.zeros((5, 8, 8))))
    assert N(y).shape == (3, 8, 8) and N(gx).shape == (2, 4, 4) and N(gt).shape == (5, 8, 8) and not N(gt).any()
    with pytest.raises(luabridge.LuaError, match=r"nn.SpatialFullConvolution: adjW and adjH must be smaller than dW and dH"):
        module("nn.SpatialFullConvolution(2, 3, 3, 3, 1, 1, 0, 0, 1, 0)")


def conv3d_ref(x, w, b, stride, pad):
    dT, dH, dW = stride
    xp = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in pad])
    o, _, kT, kH, kW = w.shape
    oT, oH, oW = [(n - k) // d + 1 for n, k, d in zip(xp.shape[2:], (kT, kH, kW), stride)]
    out = np.zeros((x.shape[0], o, oT, oH, oW))
    for t, y, xx in np.ndindex(oT, oH, oW):
        patch = xp[:, :, t * dT:t * dT + kT, y * dH:y * dH + kH, xx * dW:xx * dW + kW]
        out[:, :, t, y, xx] = np.einsum("nctij,octij->no", patch, w)
    return out + b[None, :, None, None, None]


@pytest.mark.parametrize("case", [(2, 3, 2, 3, 2, 1, 1, 1, 0, 0, 0), (1, 2, 3, 2, 2, 2, 1, 2, 1, 0, 1)])
def test_volumetric_convolution(lua, rng, case):
    nIn, nOut, kT, kW, kH, dT, dW, dH, pT, pW, pH = case
    m = module(f"nn.VolumetricConvolution({nIn}, {nOut}, {kT}, {kW}, {kH}, {dT}, {dW}, {dH}, {pT}, {pW}, {pH})")
    w, b = N(field(m, "weight")), N(field(m, "bias"))
    assert w.shape == (nOut, nIn, kT, kH, kW)
    x = rng.standard_normal((2, nIn, 4, 5, 6))
    want = conv3d_ref(x, w, b, (dT, dH, dW), (pT, pH, pW))
    np.testing.assert_allclose(N(forward(m, T(x))), want, atol=1e-12)
    np.testing.assert_allclose(N(forward(m, T(x[1]))), want[1], atol=1e-12)
    fd_check(m, x, rng=rng)
    if pytorch is not None:
        t = F.conv3d(pytorch.tensor(x), pytorch.tensor(w), pytorch.tensor(b), (dT, dH, dW), (pT, pH, pW))
        np.testing.assert_allclose(N(forward(m, T(x))), t.numpy(), atol=1e-12)
    with pytest.raises(luabridge.LuaError, match=r"nn.VolumetricConvolution: expected 4D .* got 3D input of size 4x5x6"):
        forward(m, T(x[0, 0]))


def test_volumetric_dilated_convolution(lua, rng):
    m = module("nn.VolumetricDilatedConvolution(2, 3, 2, 2, 3, 1, 2, 1, 1, 0, 1, 2, 1, 2)")
    w, b = N(field(m, "weight")), N(field(m, "bias"))   # 3x2x(kT=2)x(kH=3)x(kW=2)
    big = np.zeros((3, 2, 3, 5, 2))   # dilations T=2, H=2, W=1
    big[:, :, ::2, ::2, :] = w
    x = rng.standard_normal((2, 2, 5, 7, 6))
    want = conv3d_ref(x, big, b, (1, 1, 2), (1, 1, 0))
    np.testing.assert_allclose(N(forward(m, T(x))), want, atol=1e-12)
    fd_check(m, x[0], rng=rng)


def test_volumetric_full_convolution(lua, rng):
    m = module("nn.VolumetricFullConvolution(2, 3, 2, 3, 2, 2, 1, 2, 1, 0, 1, 1, 0, 1)")  # kT kW kH dT dW dH padT padW padH adjT adjW adjH
    w, b = N(field(m, "weight")), N(field(m, "bias"))
    assert w.shape == (2, 3, 2, 2, 3)
    x = rng.standard_normal((2, 2, 3, 4, 3))
    (dT, dH, dW), (pT, pH, pW), (aT, aH, aW) = (2, 2, 1), (1, 1, 0), (1, 1, 0)
    full = np.zeros((2, 3, (3 - 1) * dT + 2 + aT, (4 - 1) * dH + 2 + aH, (3 - 1) * dW + 3 + aW))
    for t, y, xx in np.ndindex(3, 4, 3):
        full[:, :, t * dT:t * dT + 2, y * dH:y * dH + 2, xx * dW:xx * dW + 3] += np.einsum("nc,coaij->noaij", x[:, :, t, y, xx], w)
    want = full[:, :, pT:full.shape[2] - pT, pH:full.shape[3] - pH, pW:full.shape[4] - pW] + b[None, :, None, None, None]
    np.testing.assert_allclose(N(forward(m, T(x))), want, atol=1e-12)
    fd_check(m, x[1], rng=rng)
    if pytorch is not None:
        t = F.conv_transpose3d(pytorch.tensor(x), pytorch.tensor(w), pytorch.tensor(b), (dT, dH, dW), (pT, pH, pW), (aT, aH, aW))
        np.testing.assert_allclose(N(forward(m, T(x))), t.numpy(), atol=1e-12)


def test_acc_grad_needs_forward(lua):
    m = module("nn.SpatialConvolution(1, 2, 3, 3)")
    with pytest.raises(luabridge.LuaError, match=r"nn.SpatialConvolution: call updateOutput with this input before accGradParameters"):
        lua_fn("function(m, x, g) m:accGradParameters(x, g) end")(m, T(np.zeros((1, 5, 5))), T(np.zeros((2, 3, 3))))


def test_convolution_local(lua, rng):
    nIn, nOut, iW, iH, kW, kH, dW, dH, pW, pH = 2, 3, 6, 5, 3, 2, 2, 1, 1, 0
    m = module(f"nn.SpatialConvolutionLocal({nIn}, {nOut}, {iW}, {iH}, {kW}, {kH}, {dW}, {dH}, {pW}, {pH})")
    w, b = N(field(m, "weight")), N(field(m, "bias"))
    oH, oW = (iH + 2 * pH - kH) // dH + 1, (iW + 2 * pW - kW) // dW + 1
    assert w.shape == (oH, oW, nOut, nIn, kH, kW) and b.shape == (nOut, oH, oW)
    x = rng.standard_normal((2, nIn, iH, iW))
    xp = np.pad(x, [(0, 0), (0, 0), (pH, pH), (pW, pW)])
    want = np.zeros((2, nOut, oH, oW))
    for y, xx in np.ndindex(oH, oW):
        patch = xp[:, :, y * dH:y * dH + kH, xx * dW:xx * dW + kW]
        want[:, :, y, xx] = np.einsum("ncij,ocij->no", patch, w[y, xx]) + b[:, y, xx]
    np.testing.assert_allclose(N(forward(m, T(x))), want, atol=1e-12)
    np.testing.assert_allclose(N(forward(m, T(x[1]))), want[1], atol=1e-12)
    fd_check(m, x, rng=rng)
    with pytest.raises(luabridge.LuaError, match=r"nn.SpatialConvolutionLocal: expected input planes of 5x6, got 5x7"):
        forward(m, T(np.zeros((nIn, 5, 7))))


def test_convolution_maps(lua, rng):
    table = np.array([[1, 1], [2, 1], [2, 2], [3, 2], [1, 3]], dtype=np.float64)   # {input, output}
    m = module("nn.SpatialConvolutionMap(torch.Tensor({{1, 1}, {2, 1}, {2, 2}, {3, 2}, {1, 3}}), 3, 2, 2, 1)")
    w, b = N(field(m, "weight")), N(field(m, "bias"))
    assert w.shape == (5, 2, 3) and b.shape == (3,)
    dense = np.zeros((3, 3, 2, 3))
    for k, (i, o) in enumerate(table.astype(int)):
        dense[o - 1, i - 1] = w[k]
    x = rng.standard_normal((2, 3, 6, 7))
    np.testing.assert_allclose(N(forward(m, T(x))), conv2d_ref(x, dense, b, (1, 2), (0, 0)), atol=1e-12)
    fd_check(m, x, rng=rng)
    f = module("nn.SpatialFullConvolutionMap(torch.Tensor({{1, 1}, {2, 1}, {2, 2}, {3, 2}, {1, 3}}), 3, 2, 2, 1)")
    w, b = N(field(f, "weight")), N(field(f, "bias"))
    full = np.zeros((3, 3, 2, 3))
    for k, (i, o) in enumerate(table.astype(int)):
        full[i - 1, o - 1] = w[k]
    np.testing.assert_allclose(N(forward(f, T(x))), full_conv_ref(x, full, b, (1, 2), (0, 0), (0, 0)), atol=1e-12)
    fd_check(f, x[0], rng=rng)


def test_connection_tables(lua):
    tables = lua_fn("function() require 'nn'; return nn.tables.full(2, 3), nn.tables.oneToOne(3), nn.tables.random(5, 4, 2) end")
    full, one, rand = (N(t) for t in tables())
    np.testing.assert_array_equal(full, [[i, o] for o in (1, 2, 3) for i in (1, 2)])
    np.testing.assert_array_equal(one, [[1, 1], [2, 2], [3, 3]])
    assert rand.shape == (8, 2) and list(rand[:, 1]) == [1, 1, 2, 2, 3, 3, 4, 4]
    for o in range(4):   # distinct inputs per output plane, all within range
        ins = rand[2 * o:2 * o + 2, 0]
        assert len(set(ins)) == 2 and set(ins) <= {1, 2, 3, 4, 5}
