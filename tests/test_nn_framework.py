"""nn framework: containers, getParameters, clone, type conversion and error paths, checked
against numpy float64 references. The layers are small Lua modules defined here (an affine map
and an elementwise square), so these tests depend on the framework only."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import luabridge
from luabridge.core.runtime import bridge

_MODULES = r"""
if torch.getmetatable('pyfw.Affine') then return end
-- y = x W^T + b, for a vector or a batch of rows
local Affine, parent = torch.class('pyfw.Affine', 'nn.Module')
local function rows(t) return t:dim() == 2 and t or t:contiguous():view(1, t:nElement()) end
function Affine:__init(nIn, nOut)
  parent.__init(self)
  self.weight, self.gradWeight = torch.randn(nOut, nIn), torch.zeros(nOut, nIn)
  self.bias, self.gradBias = torch.randn(nOut), torch.zeros(nOut)
end
function Affine:updateOutput(x)
  local batch = rows(x)
  local out = torch.mm(batch, self.weight:t())
  out:add(self.bias:view(1, self.bias:nElement()):expandAs(out))
  self.output:resize(out:size()):copy(out)
  if x:dim() == 1 then self.output:resize(self.weight:size(1)) end
  return self.output
end
function Affine:updateGradInput(x, g)
  local gb = rows(g)
  self.gradInput:resizeAs(x):copy(torch.mm(gb, self.weight))
  return self.gradInput
end
function Affine:accGradParameters(x, g, scale)
  local xb = rows(x)
  local gb = rows(g)
  self.gradWeight:add(scale or 1, torch.mm(gb:t(), xb))
  self.gradBias:add(scale or 1, gb:sum(1):view(self.gradBias:nElement()))
end
local Square = torch.class('pyfw.Square', 'nn.Module')
function Square:updateOutput(x) self.output:resizeAs(x):copy(x):cmul(x); return self.output end
function Square:updateGradInput(x, g) self.gradInput:resizeAs(x):copy(x):mul(2):cmul(g); return self.gradInput end
-- the window [i, i + n) of dimension d
local Narrow, nparent = torch.class('pyfw.Narrow', 'nn.Module')
function Narrow:__init(d, i, n) nparent.__init(self); self.d, self.i, self.n = d, i, n end
function Narrow:updateOutput(x)
  local part = x:narrow(self.d, self.i, self.n)
  self.output:resize(part:size()):copy(part)
  return self.output
end
function Narrow:updateGradInput(x, g)
  self.gradInput:resizeAs(x):zero():narrow(self.d, self.i, self.n):copy(g)
  return self.gradInput
end
"""


@pytest.fixture(scope="module")
def nn(lua: Any) -> Any:
    luabridge.require("nn")
    luabridge.execute(_MODULES)
    return lua


def run(src: str, *args: Any) -> Any:
    """Calls the Lua function `src`; numpy arrays go in as tensors viewing their memory."""
    conv = [luabridge.from_numpy(a) if isinstance(a, np.ndarray) else a for a in args]
    return bridge().call(luabridge.eval(src), *conv)


def arr(t: Any) -> np.ndarray:
    return luabridge.to_numpy(t).copy()


def params(m: Any) -> tuple[np.ndarray, np.ndarray]:
    return arr(m.weight), arr(m.bias)


def affine(m: Any, x: np.ndarray) -> np.ndarray:
    w, b = params(m)
    return x @ w.T + b


def forward_backward(net: Any, x: np.ndarray, g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    out, gin = run("function(m, x, g) m:zeroGradParameters(); local y = m:forward(x):clone();"
                   " return y, m:backward(x, g) end", net, x, g)
    return arr(out), arr(gin)


def test_sequential_batch_values(nn, rng):
    net = luabridge.eval("nn.Sequential():add(pyfw.Affine(5, 4)):add(pyfw.Square()):add(pyfw.Affine(4, 3))")
    l1, l3 = net.modules[1], net.modules[3]
    x = rng.standard_normal((5, 6)).T  # non-contiguous batch of 6
    g = rng.standard_normal((6, 3))
    h = affine(l1, x)
    expect = affine(l3, h * h)
    out, gin = forward_backward(net, x, g)
    np.testing.assert_allclose(out, expect, rtol=1e-12)
    w1, _ = params(l1)
    w3, _ = params(l3)
    gh = (g @ w3) * 2 * h
    np.testing.assert_allclose(gin, gh @ w1, rtol=1e-10)
    np.testing.assert_allclose(arr(l3.gradWeight), g.T @ (h * h), rtol=1e-10)
    np.testing.assert_allclose(arr(l1.gradBias), gh.sum(0), rtol=1e-10)


def test_concat_and_depth_concat(nn, rng):
    net = luabridge.eval("nn.Concat(2):add(pyfw.Affine(3, 2)):add(pyfw.Square()):add(pyfw.Affine(3, 1))")
    x, g = rng.standard_normal((4, 3)), rng.standard_normal((4, 6))
    a, c = net.modules[1], net.modules[3]
    out, gin = forward_backward(net, x, g)
    np.testing.assert_allclose(out, np.hstack([affine(a, x), x * x, affine(c, x)]), rtol=1e-12)
    expect = g[:, :2] @ params(a)[0] + 2 * x * g[:, 2:5] + g[:, 5:] @ params(c)[0]
    np.testing.assert_allclose(gin, expect, rtol=1e-10)


def test_depth_concat_padding(nn, rng):
    # the second branch squares and crops 2x5x4 to 2x3x2; DepthConcat centres it in 2x5x4
    net = luabridge.eval("""nn.DepthConcat(1):add(nn.Identity())
        :add(nn.Sequential():add(pyfw.Square()):add(pyfw.Narrow(2, 2, 3)):add(pyfw.Narrow(3, 1, 2)))""")
    x = rng.standard_normal((2, 5, 4))
    g = rng.standard_normal((4, 5, 4))
    out, gin = forward_backward(net, x, g)
    expect = np.zeros((4, 5, 4))
    expect[:2] = x
    # 3 of 5 rows: margin 2 -> start 1 (0-based); 2 of 4 cols: margin 2 -> start 1
    expect[2:, 1:4, 1:3] = (x * x)[:, 1:4, 0:2]
    np.testing.assert_allclose(out, expect, rtol=1e-12)
    gexp = g[:2].copy()
    gsq = np.zeros((2, 5, 4))
    gsq[:, 1:4, 0:2] = g[2:, 1:4, 1:3]
    np.testing.assert_allclose(gin, gexp + 2 * x * gsq, rtol=1e-10)


def test_parallel(nn, rng):
    net = luabridge.eval("nn.Parallel(2, 1):add(pyfw.Affine(3, 2)):add(pyfw.Square()):add(pyfw.Affine(3, 4))")
    x = rng.standard_normal((3, 3))
    g = rng.standard_normal(9)
    a, c = net.modules[1], net.modules[3]
    out, gin = forward_backward(net, x, g)
    np.testing.assert_allclose(out, np.concatenate([affine(a, x[:, 0]), x[:, 1] ** 2, affine(c, x[:, 2])]),
                               rtol=1e-12)
    expect = np.stack([g[:2] @ params(a)[0], 2 * x[:, 1] * g[2:5], g[5:] @ params(c)[0]], axis=1)
    np.testing.assert_allclose(gin, expect, rtol=1e-10)


def test_tables(nn, rng):
    net = luabridge.eval("""nn.Sequential()
        :add(nn.ConcatTable():add(pyfw.Affine(3, 2)):add(pyfw.Square()))
        :add(nn.ParallelTable():add(pyfw.Square()):add(nn.Identity()))""")
    a = net.modules[1].modules[1]
    x = rng.standard_normal(3)
    g1, g2 = rng.standard_normal(2), rng.standard_normal(3)
    res = run("""function(m, x, g1, g2)
        local y = m:forward(x)
        local y1, y2 = y[1]:clone(), y[2]:clone()
        return y1, y2, m:backward(x, {g1, g2})
      end""", net, x, g1, g2)
    h = affine(a, x)
    np.testing.assert_allclose(arr(res[0]), h * h, rtol=1e-12)
    np.testing.assert_allclose(arr(res[1]), x * x, rtol=1e-12)
    expect = (2 * h * g1) @ params(a)[0] + 2 * x * g2
    np.testing.assert_allclose(arr(res[2]), expect, rtol=1e-10)


def test_bottle(nn, rng):
    net = luabridge.eval("nn.Bottle(pyfw.Affine(4, 3))")
    x = rng.standard_normal((2, 5, 4))
    g = rng.standard_normal((2, 5, 3))
    out, gin = forward_backward(net, x, g)
    inner = net.modules[1]
    np.testing.assert_allclose(out, affine(inner, x.reshape(10, 4)).reshape(2, 5, 3), rtol=1e-12)
    np.testing.assert_allclose(gin, g @ params(inner)[0], rtol=1e-10)
    np.testing.assert_allclose(arr(inner.gradWeight), g.reshape(10, 3).T @ x.reshape(10, 4), rtol=1e-10)


@pytest.mark.parametrize("sizes", [[(3, 2)], [(3, 4), (4, 1)], [(1, 1), (2, 5), (5, 3)]])
def test_get_parameters_layout(nn, sizes):
    net = luabridge.eval("nn.Sequential()")
    for n_in, n_out in sizes:
        run("function(s, i, o) s:add(pyfw.Affine(i, o)) end", net, n_in, n_out)
    mods = [net.modules[i + 1] for i in range(len(sizes))]
    before = np.concatenate([np.concatenate([w.ravel(), b]) for w, b in map(params, mods)])
    flat, grad = run("function(s) return s:getParameters() end", net)
    p = luabridge.to_numpy(flat)
    np.testing.assert_array_equal(p, before)
    assert luabridge.to_numpy(grad).shape == p.shape
    p[:] = np.arange(p.size)  # the modules view the flat tensor
    np.testing.assert_array_equal(np.concatenate([np.concatenate([w.ravel(), b]) for w, b in map(params, mods)]),
                                  np.arange(p.size))


def test_clone_and_type(nn, rng):
    net = luabridge.eval("nn.Sequential():add(pyfw.Affine(3, 2)):add(pyfw.Affine(2, 2))")
    run("function(s) s.modules[2]:share(s.modules[1], 'bias') end", net)
    w = arr(net.modules[1].weight)
    copy = run("function(s) return s:clone() end", net)
    run("function(c) c.modules[1].bias:fill(5) end", copy)
    np.testing.assert_array_equal(arr(copy.modules[2].bias), [5, 5])
    assert not np.any(arr(net.modules[2].bias) == 5)
    run("function(s) s:float() end", net)
    assert luabridge.eval("torch.type")(net.modules[1].weight) == "torch.FloatTensor"
    np.testing.assert_array_equal(arr(net.modules[1].weight), w.astype(np.float32))
    x = rng.standard_normal(3).astype(np.float32)
    out = arr(run("function(s, x) return s:forward(x) end", net, x))
    w1, b1 = params(net.modules[1])
    w2, _ = params(net.modules[2])
    np.testing.assert_allclose(out, (x @ w1.T + b1) @ w2.T + b1, rtol=1e-5)


def test_error_prefix_from_python(nn):
    net = luabridge.eval("nn.Sequential():add(nn.Identity()):add(nn.Concat(1):add(pyfw.Affine(3, 2)))")
    x = np.zeros(5)
    with pytest.raises(luabridge.LuaError, match=r"In 2 module of nn\.Sequential:\nIn 1 module of nn\.Concat:\n"):
        run("function(m, x) return m:forward(x) end", net, x)


def test_argument_errors(nn):
    cases = [
        ("function() nn.Sequential():remove(1) end", r"out of range"),
        ("function() nn.Sequential():insert(nn.Identity(), 3) end", r"contiguous"),
        ("function() nn.Parallel(1, 1):forward(torch.randn(2, 2)) end", r"nn\.Parallel: the input has 2 slices"),
        ("function() nn.Parallel(3, 1):forward(torch.randn(2, 2)) end", r"at least 3 dimensions"),
        ("function() nn.ParallelTable():forward(torch.randn(2)) end", r"expected a table"),
        ("function() nn.MapTable(nn.Identity()):add(nn.Identity()) end", r"single module"),
        ("function() nn.utils.addSingletonDimension(torch.randn(2), 3) end", r"invalid dimension 3"),
    ]
    for code, pattern in cases:
        with pytest.raises(luabridge.LuaError, match=pattern):
            run(code)


def test_cuda_conversion_on_numpy_standin(nn, rng):
    """Module:cuda() / getParameters / clone / double() through the CUDA backend, with numpy
    standing in for CuPy (as tests/test_cuda.py does)."""
    from luabridge.providers.torch_cuda import arrays as cuda
    cuda.use_array_module(np)
    try:
        net = luabridge.eval("nn.Sequential():add(pyfw.Affine(3, 4)):add(pyfw.Affine(4, 2))")
        run("function(s) local a, b = s.modules[1], s.modules[2]; b.bias:set(a.bias:narrow(1, 2, 2));"
            " b.gradBias:set(a.gradBias:narrow(1, 2, 2)) end", net)
        w, b = params(net.modules[1])
        res = run("""function(s)
            s:cuda()
            local a, b = s.modules[1], s.modules[2]
            local typ, shared = torch.type(a.weight), a.bias:storage() == b.bias:storage()
            local p = s:getParameters()
            local c = s:clone()
            c.modules[1].weight:fill(0)
            s:double()
            return typ, shared, torch.type(p), p:nElement(), torch.type(c.modules[2].bias)
          end""", net)
        assert tuple(res) == ("torch.CudaTensor", True, "torch.CudaTensor", 12 + 4 + 8, "torch.CudaTensor")
        w2, b2 = params(net.modules[1])
        np.testing.assert_array_equal(w2, w.astype(np.float32))
        np.testing.assert_array_equal(arr(net.modules[2].bias), b2[1:3])
    finally:
        cuda.use_array_module(None)


def test_clear_state_empties_the_buffers_subclasses_name(lua):
    sizes = luabridge.execute("""
      require 'nn'
      local m = nn.CMul(3)
      m:forward(torch.randn(4, 3))
      m._probe = torch.Tensor(5)
      nn.Module.clearState(m, '_probe')
      return m.output:nElement(), m._probe:nElement()
    """)
    assert sizes == (0, 0)
