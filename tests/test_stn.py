"""lua/stn: the spatial transformer modules of qassemoquab/stnbhwd (BilinearSamplerBHWD,
AffineGridGeneratorBHWD, AffineTransformMatrixGenerator). Expected values are numpy's: the
sampler written pixel by pixel from stnbhwd's C, gradients by central differences."""
from __future__ import annotations

import math

import numpy as np
import pytest

from helpers import N, T, assert_lua_errors, lua_fn, numeric_grad

sampler = lua_fn("""function(x, g, go)
  require 'stn'
  local m = nn.BilinearSamplerBHWD()
  local y = m:forward({x, g}):clone()
  local gi = m:backward({x, g}, go)
  return y, gi[1]:clone(), gi[2]:clone()
end""")


def sample_reference(x, g):
    B, H, W, D = x.shape
    _, oH, oW, _ = g.shape
    out = np.zeros((B, oH, oW, D))
    for b in range(B):
        for i in range(oH):
            for j in range(oW):
                yc = (g[b, i, j, 0] + 1) * (H - 1) / 2
                xc = (g[b, i, j, 1] + 1) * (W - 1) / 2
                y0, x0 = math.floor(yc), math.floor(xc)
                wy, wx = 1 - (yc - y0), 1 - (xc - x0)
                for dy, dx, w in ((0, 0, wy * wx), (0, 1, wy * (1 - wx)), (1, 0, (1 - wy) * wx), (1, 1, (1 - wy) * (1 - wx))):
                    yy, xx = y0 + dy, x0 + dx
                    if 0 <= yy <= H - 1 and 0 <= xx <= W - 1:
                        out[b, i, j] += w * x[b, yy, xx]
    return out


def test_bilinear_sampler_forward_and_gradients(rng):
    x = rng.standard_normal((2, 5, 6, 3))
    g = rng.uniform(-1.3, 1.3, (2, 4, 3, 2))   # some points outside the image
    go = rng.standard_normal((2, 4, 3, 3))
    y, gx, gg = sampler(T(x), T(g), T(go))
    np.testing.assert_allclose(N(y), sample_reference(x, g), rtol=1e-12, atol=1e-12)
    loss = lambda: float((sample_reference(x, g) * go).sum())  # noqa: E731
    np.testing.assert_allclose(N(gx), numeric_grad(loss, x), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(N(gg), numeric_grad(loss, g, eps=1e-7), rtol=1e-5, atol=1e-6)


def test_bilinear_sampler_single_sample_and_float(rng):
    x = rng.standard_normal((4, 4, 2)).astype(np.float32)
    g = rng.uniform(-1, 1, (3, 3, 2)).astype(np.float32)
    f = lua_fn("""function(x, g)
      require 'stn'
      local m = nn.BilinearSamplerBHWD()
      local y = m:forward({x, g})
      local gi = m:backward({x, g}, y:clone():fill(1))
      return y:clone(), torch.type(y), gi[1]:dim(), gi[2]:dim()
    end""")
    y, kind, d1, d2 = f(T(x), T(g))
    assert kind == "torch.FloatTensor" and (d1, d2) == (3, 3)
    np.testing.assert_allclose(N(y), sample_reference(x[None].astype(np.float64), g[None].astype(np.float64))[0],
                               rtol=1e-5, atol=1e-6)
    assert_lua_errors([
        ("function() require 'stn'; nn.BilinearSamplerBHWD():forward(torch.randn(2, 3, 3, 1)) end",
         r"nn\.BilinearSamplerBHWD: the input is a table \{images, grids\}"),
        ("function() require 'stn'; nn.BilinearSamplerBHWD():forward({torch.randn(2, 3, 3, 1), torch.randn(2, 3, 3, 3)}) end",
         r"grids must be B x oH x oW x 2 .* got size 2x3x3x3"),
    ])


def test_affine_grid_generator(rng):
    m = rng.standard_normal((2, 2, 3))
    go = rng.standard_normal((2, 4, 5, 2))
    f = lua_fn("""function(m, go)
      require 'stn'
      local g = nn.AffineGridGeneratorBHWD(4, 5)
      local y = g:forward(m):clone()
      return y, g:backward(m, go):clone(), g:forward(m[1]):clone()
    end""")
    y, gm, y1 = f(T(m), T(go))
    ys, xs = np.linspace(-1, 1, 4), np.linspace(-1, 1, 5)
    base = np.stack(np.broadcast_arrays(ys[:, None], xs[None, :], np.ones((4, 5))), axis=-1)   # (y, x, 1)
    want = np.einsum("hwk,bjk->bhwj", base, m)
    np.testing.assert_allclose(N(y), want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(N(y1), want[0], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(N(gm), np.einsum("bhwj,hwk->bjk", go, base), rtol=1e-12, atol=1e-12)


def affine_reference(p, rot, scale, trans):
    out = []
    for row in p:
        k, a, s, t = 0, 0.0, 1.0, np.zeros(2)
        if rot:
            a, k = row[k], k + 1
        if scale:
            s, k = row[k], k + 1
        if trans:
            t = row[k:k + 2]
        R = np.array([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]])
        S = np.diag([s, s])
        A = R @ S
        out.append(np.concatenate([A, (A @ t)[:, None]], axis=1))
    return np.array(out)


@pytest.mark.parametrize("rot,scale,trans", [(True, True, True), (True, False, False), (False, True, True),
                                             (False, False, True), (True, False, True)])
def test_affine_transform_matrix_generator(rng, rot, scale, trans):
    k = rot + scale + 2 * trans
    p = rng.standard_normal((3, k))
    go = rng.standard_normal((3, 2, 3))
    f = lua_fn("""function(p, go, r, s, t)
      require 'stn'
      local m = nn.AffineTransformMatrixGenerator(r, s, t)
      local y = m:forward(p):clone()
      return y, m:backward(p, go):clone()
    end""")
    y, gp = f(T(p), T(go), rot, scale, trans)
    np.testing.assert_allclose(N(y), affine_reference(p, rot, scale, trans), rtol=1e-12, atol=1e-12)
    loss = lambda: float((affine_reference(p, rot, scale, trans) * go).sum())  # noqa: E731
    np.testing.assert_allclose(N(gp), numeric_grad(loss, p), rtol=1e-6, atol=1e-8)


def test_affine_full_mode_and_errors(rng):
    p = rng.standard_normal((2, 6))
    f = lua_fn("""function(p)
      require 'stn'
      local m = nn.AffineTransformMatrixGenerator()
      local y = m:forward(p):clone()
      return y, m:backward(p, y:clone():fill(1)):clone()
    end""")
    y, g = f(T(p))
    np.testing.assert_array_equal(N(y), p.reshape(2, 2, 3))
    np.testing.assert_array_equal(N(g), np.ones((2, 6)))
    assert_lua_errors([
        ("function() require 'stn'; nn.AffineTransformMatrixGenerator(true, true):forward(torch.randn(2, 3)) end",
         r"Expected 2 parameters, got input of size 2x3"),
        ("function() require 'stn'; nn.AffineGridGeneratorBHWD(3, 3):forward(torch.randn(2, 3, 3)) end",
         r"please input affine transform matrices \(bx2x3\), got size 2x3x3"),
    ])
