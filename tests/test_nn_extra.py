"""nn.hessian (diagonal Hessians) and the small extra modules (Collapse, ZeroGrad, WhiteNoise,
MaskedSelect, PixelShuffle, Profile, DontCast, Convert) against numpy float64 references."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import luabridge
from nn_layers_check import backward, call, check_gradients, field, forward, lua_tensor, module

_HESSIAN = """function(m, x)
  nn.hessian.enable()
  m:initDiagHessianParameters()
  local y = m:forward(x)
  local ones = y.new():resizeAs(y):fill(1)
  m.diagHessianWeight:zero(); m.diagHessianBias:zero()
  local hi = m:updateDiagHessianInput(x, ones)
  m:accDiagHessianParameters(x, ones)
  return hi, m.diagHessianWeight, m.diagHessianBias
end"""


def np_of(t: Any) -> np.ndarray:
    return luabridge.to_numpy(t).copy()


@pytest.mark.parametrize("batch", [None, 5])
def test_linear_diag_hessian(batch: int | None) -> None:
    """With unit output Hessian: input (W^2)^T 1, weight sum_b x_j^2, bias the batch count."""
    rng = np.random.default_rng(1)
    m = module("nn.Linear(4, 3)")
    shape = (4,) if batch is None else (batch, 4)
    x = rng.standard_normal(shape)
    hi, hw, hb = call(_HESSIAN, m, lua_tensor(x))
    w = field(m, "weight")
    xs = x.reshape(-1, 4)
    np.testing.assert_allclose(np_of(hi), np.broadcast_to((w ** 2).sum(0), xs.shape).reshape(shape),
                               rtol=1e-12)
    np.testing.assert_allclose(np_of(hw), np.broadcast_to((xs ** 2).sum(0), (3, 4)), rtol=1e-12)
    np.testing.assert_allclose(np_of(hb), np.full(3, xs.shape[0]), rtol=1e-12)
    # the weight and gradient fields are back in place
    assert np.array_equal(field(m, "weight"), w)


def test_pointwise_and_criterion_hessians() -> None:
    rng = np.random.default_rng(2)
    x, h = rng.standard_normal((3, 4)), rng.random((3, 4))
    got = call("""function(x, h) nn.hessian.enable(); local m = nn.Tanh(); m:forward(x)
      return m:updateDiagHessianInput(x, h) end""", lua_tensor(x), lua_tensor(h))
    np.testing.assert_allclose(np_of(got), (1 - np.tanh(x) ** 2) ** 2 * h, rtol=1e-12)
    mse = call("function(x) nn.hessian.enable(); return nn.MSECriterion():updateDiagHessianInput(x, x) end",
               lua_tensor(x))
    np.testing.assert_allclose(np_of(mse), np.full((3, 4), 2 / 12))
    x[0, 0] = 0
    l1 = call("function(x) nn.hessian.enable(); return nn.L1Cost():updateDiagHessianInput(x) end",
              lua_tensor(x))
    np.testing.assert_array_equal(np_of(l1), (x != 0).astype(float))


@pytest.mark.parametrize("make,shape", [
    ("nn.Linear(3, 2)", (2, 3)),
    ("nn.SpatialConvolution(2, 3, 3, 3)", (2, 5, 5)),
    ("nn.SpatialConvolutionMap(nn.tables.random(2, 3, 1), 2, 2)", (2, 4, 4)),
])
def test_jacobian_diag_hessian_helpers(make: str, shape: tuple) -> None:
    """testDiagHessian* agree for linear modules and report a wrong Hessian."""
    m = module(make)
    x = lua_tensor(np.zeros(shape))
    for part in ("Input", "Weight", "Bias"):
        err = call(f"function(m, x) nn.hessian.enable(); return nn.Jacobian.testDiagHessian{part}(m, x) end", m, x)
        assert err < 1e-8, part
    bad = call("""function(m, x)
      local up = m.updateDiagHessianInput
      m.updateDiagHessianInput = function(self, ...) local h = up(self, ...); h:mul(2); return h end
      return nn.Jacobian.testDiagHessianInput(m, x) end""", m, x)
    assert bad > 1e-3


def test_hessian_sequential() -> None:
    """Sequential chains the input Hessians; parameters()/getParameters() give a third list."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3))
    h, a, b, n, total = call("""function(x) nn.hessian.enable()
      local a, b = nn.Linear(3, 4), nn.Linear(4, 2)
      local s = nn.Sequential():add(a):add(nn.Tanh()):add(b)
      s:initDiagHessianParameters(); local y = s:forward(x)
      local h = s:updateDiagHessianInput(x, y.new():resizeAs(y):fill(1))
      local _, _, hs = s:parameters(); local _, _, flat = s:getParameters()
      return h, a, b, #hs, flat:nElement() end""", lua_tensor(x))
    assert (n, total) == (4, 3 * 4 + 4 + 4 * 2 + 2)
    w1, b1, w2 = field(a, "weight"), field(a, "bias"), field(b, "weight")
    hz = np.broadcast_to((w2 ** 2).sum(0), (2, 4)) * (1 - np.tanh(x @ w1.T + b1) ** 2) ** 2
    np.testing.assert_allclose(np_of(h), hz @ w1 ** 2, rtol=1e-12)


def test_collapse() -> None:
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 3, 2, 5))
    m = module("nn.Collapse(3)")
    xt = x.transpose(3, 1, 2, 0)  # non-contiguous
    np.testing.assert_array_equal(forward(m, x), x.reshape(4, -1))
    np.testing.assert_array_equal(forward(m, xt), np.ascontiguousarray(xt).reshape(5, -1))
    g = rng.standard_normal((5, 24))
    np.testing.assert_array_equal(backward(m, xt, g), g.reshape(xt.shape))
    np.testing.assert_array_equal(forward(module("nn.Collapse(3)"), x[0]), x[0].reshape(-1))


def test_zero_grad() -> None:
    rng = np.random.default_rng(6)
    x = rng.standard_normal((3, 4))
    m = module("nn.ZeroGrad()")
    np.testing.assert_array_equal(forward(m, x), x)
    np.testing.assert_array_equal(backward(m, x, np.ones((3, 4))), np.zeros((3, 4)))


def test_white_noise() -> None:
    rng = np.random.default_rng(7)
    x = rng.standard_normal((200, 50))
    m = module("nn.WhiteNoise(0.5, 2)")
    noise = forward(m, x) - x
    assert abs(noise.mean() - 0.5) < 0.1 and abs(noise.std() - 2) < 0.1
    g = rng.standard_normal(x.shape)
    np.testing.assert_array_equal(backward(m, x, g), g)
    call("function(m) m:evaluate() end", m)
    np.testing.assert_allclose(forward(m, x), x + 0.5, rtol=1e-15)
    with pytest.raises(luabridge.LuaError, match="only defined while training"):
        backward(m, x, g)


def test_masked_select() -> None:
    rng = np.random.default_rng(8)
    x = rng.standard_normal((4, 5))
    mask = (rng.random((4, 5)) > 0.5).astype(np.uint8)
    mt = call("function(a) return a:byte() end", lua_tensor(mask.astype(float)))
    m = module("nn.MaskedSelect()")
    inp = call("function(x, k) return {x, k} end", lua_tensor(x), mt)
    out = np_of(call("function(m, i) return m:forward(i) end", m, inp))
    np.testing.assert_array_equal(out, x[mask == 1])
    g = rng.standard_normal(out.shape)
    gx, gm = call("function(m, i, g) local r = m:backward(i, g) return r[1], r[2] end", m, inp, lua_tensor(g))
    want = np.zeros_like(x)
    want[mask == 1] = g
    np.testing.assert_array_equal(np_of(gx), want)
    np.testing.assert_array_equal(np_of(gm), np.zeros((4, 5)))


def _pixel_shuffle(x: np.ndarray, r: int) -> np.ndarray:
    b, c, h, w = x.shape
    out = np.empty((b, c // (r * r), h * r, w * r))
    for k in range(c // (r * r)):
        for i in range(r):
            for j in range(r):
                out[:, k, i::r, j::r] = x[:, k * r * r + i * r + j]
    return out


@pytest.mark.parametrize("batched", [False, True])
def test_pixel_shuffle(batched: bool) -> None:
    rng = np.random.default_rng(9)
    x4 = rng.standard_normal((2, 8, 3, 2))
    x = x4 if batched else x4[0]
    m = module("nn.PixelShuffle(2)")
    want = _pixel_shuffle(x4, 2)
    np.testing.assert_array_equal(forward(m, x), want if batched else want[0])
    xt = np.swapaxes(np.ascontiguousarray(np.swapaxes(x, -1, -2)), -1, -2)  # non-contiguous
    np.testing.assert_array_equal(forward(m, xt), want if batched else want[0])
    check_gradients(m, np.ascontiguousarray(x), rng=rng)
    with pytest.raises(luabridge.LuaError, match="PixelShuffle: 6 input planes is not a multiple"):
        forward(m, np.zeros((6, 2, 2)))


def test_profile(capfd: pytest.CaptureFixture) -> None:
    rng = np.random.default_rng(10)
    x, g = rng.standard_normal((2, 3)), rng.standard_normal((2, 4))
    m = module("nn.Profile(nn.Linear(3, 4), 2, 'lin')")
    w, b = field(m.modules[1], "weight"), field(m.modules[1], "bias")
    np.testing.assert_allclose(forward(m, x), x @ w.T + b, rtol=1e-12)
    np.testing.assert_allclose(backward(m, x, g), g @ w, rtol=1e-12)
    assert "forward passes" not in capfd.readouterr().out  # one forward so far
    forward(m, x)
    out = capfd.readouterr().out
    assert "lin took" in out and "seconds for 2 forward passes" in out
    assert (m.numFwds, m.summedFwdTime) == (0, 0)


def test_dont_cast() -> None:
    rng = np.random.default_rng(11)
    x, g = rng.standard_normal((3, 4)), rng.standard_normal((3, 2))
    m = module("nn.DontCast(nn.Linear(4, 2):float(), true)")
    types = call("""function(m, x, g) local y = m:forward(x); local gi = m:backward(x, g)
      m:double(); return torch.type(y), torch.type(gi), torch.type(m.modules[1].weight) end""",
                 m, lua_tensor(x), lua_tensor(g))
    assert tuple(types) == ("torch.DoubleTensor", "torch.DoubleTensor", "torch.FloatTensor")
    w = field(m.modules[1], "weight").astype(np.float64)
    b = field(m.modules[1], "bias").astype(np.float64)
    np.testing.assert_allclose(forward(m, x), x.astype(np.float32).astype(np.float64) @ w.T + b, rtol=1e-5)
    with pytest.raises(luabridge.LuaError, match="cannot infer moduleType"):
        module("nn.DontCast(nn.ConcatTable(), true)")


@pytest.mark.parametrize("src,dst,shape,ref", [
    ("bchw", "chwb", (3, 2, 4, 5), lambda x: x.transpose(1, 2, 3, 0)),
    ("bchw", "bf", (3, 2, 4, 5), lambda x: x.reshape(3, -1)),
    ("chw", "hwc", (2, 4, 5), lambda x: x.transpose(1, 2, 0)),
    ("chw", "f", (2, 4, 5), lambda x: x.reshape(-1)),
    ("bf", "b", (3, 1), lambda x: x[:, 0]),
])
def test_convert(src: str, dst: str, shape: tuple, ref: Any) -> None:
    rng = np.random.default_rng(12)
    x = rng.standard_normal(shape)
    m = module(f"nn.Convert('{src}', '{dst}')")
    np.testing.assert_array_equal(forward(m, x), ref(x))
    check_gradients(m, x, rng=rng)


def test_convert_errors() -> None:
    with pytest.raises(luabridge.LuaError, match="unrecognized conversion of shape bchw to bxyz"):
        forward(module("nn.Convert('bchw', 'bxyz')"), np.zeros((2, 3, 4, 5)))
    with pytest.raises(luabridge.LuaError, match="cannot convert shape 'bchw' to bt"):
        forward(module("nn.Convert('bchw', 'bt')"), np.zeros((2, 3, 4, 5)))
    with pytest.raises(luabridge.LuaError, match="both or neither shapes must be b\\*"):
        module("nn.Convert('b*', 'bf')")


def _interp_axis(x: np.ndarray, axis: int, out: int) -> np.ndarray:
    """Linear interpolation with aligned corners along one axis (np.interp per line)."""
    n = x.shape[axis]
    pos = np.linspace(0, n - 1, out) if out > 1 else np.zeros(1)
    return np.apply_along_axis(lambda v: np.interp(pos, np.arange(n), v), axis, x)


@pytest.mark.parametrize("shape,scale", [((2, 3, 2, 3), 2), ((1, 2, 2, 3, 2), 3)])
def test_upsampling_nearest(shape: tuple, scale: int) -> None:
    rng = np.random.default_rng(13)
    x = rng.standard_normal(shape)
    want = x
    for axis in range(2, x.ndim):
        want = np.repeat(want, scale, axis=axis)
    m = module(f"nn.UpSampling({scale})")
    np.testing.assert_array_equal(forward(m, x), want)
    xt = np.swapaxes(np.ascontiguousarray(np.swapaxes(x, 0, 1)), 0, 1)  # a non-contiguous view
    np.testing.assert_array_equal(forward(m, xt), want)
    check_gradients(m, x, rng=rng)


@pytest.mark.parametrize("shape,make,out", [
    ((2, 2, 3, 4), "nn.UpSampling(2, 'bilinear')", (6, 8)),
    ((1, 2, 2, 3, 2), "nn.UpSampling(3, 'trilinear')", (6, 9, 6)),
    ((2, 1, 3, 4), "nn.UpSampling({oheight = 5, owidth = 1}, 'linear')", (5, 1)),
])
def test_upsampling_linear(shape: tuple, make: str, out: tuple) -> None:
    rng = np.random.default_rng(14)
    x = rng.standard_normal(shape)
    want = x
    for axis, n in zip(range(2, x.ndim), out):
        want = _interp_axis(want, axis, n)
    m = module(make)
    np.testing.assert_allclose(forward(m, x), want, rtol=1e-12, atol=1e-14)
    check_gradients(m, x, rng=rng)


def test_upsampling_errors() -> None:
    with pytest.raises(luabridge.LuaError, match="expected a 4D or 5D input, got 3D"):
        forward(module("nn.UpSampling(2)"), np.zeros((2, 3, 4)))
    with pytest.raises(luabridge.LuaError, match="scale_factor must be integer"):
        module("nn.UpSampling(1.5)")
    with pytest.raises(luabridge.LuaError, match="requires a scale_factor"):
        module("nn.UpSampling({owidth = 2, oheight = 2})")
    with pytest.raises(luabridge.LuaError, match="no output depth"):
        forward(module("nn.UpSampling({owidth = 2, oheight = 2}, 'linear')"), np.zeros((1, 1, 2, 2, 2)))
    m = module("nn.UpSampling(2)")
    forward(m, np.zeros((1, 1, 2, 2)))
    with pytest.raises(luabridge.LuaError, match="gradOutput should be 1x1x4x4, got 1x1x3x4"):
        backward(m, np.zeros((1, 1, 2, 2)), np.zeros((1, 1, 3, 4)))


@pytest.mark.parametrize("make", ["nn.Linear(4, 2)", "nn.SpatialConvolutionMap(nn.tables.full(1, 2), 2, 2)"])
def test_hessian_keeps_output_and_gradients(make: str) -> None:
    rng = np.random.default_rng(15)
    m = module(make)
    x = rng.standard_normal((1, 4, 4) if "Map" in make else (3, 4))
    y = forward(m, x)
    g = rng.standard_normal(y.shape)
    backward(m, x, g)
    grad_w = field(m, "gradWeight").copy()
    call("""function(m, x) nn.hessian.enable(); m:initDiagHessianParameters()
      local ones = m.output.new():resizeAs(m.output):fill(1)
      m:updateDiagHessianInput(x, ones); m:accDiagHessianParameters(x, ones) end""", m, lua_tensor(x))
    np.testing.assert_array_equal(np_of(m.output), y)
    np.testing.assert_array_equal(field(m, "gradWeight"), grad_w)
