"""The convolution's fast passes (backend/cpu/nn_conv.lua): images unfolded a chunk at a time, the
bias carried by a row of ones in the GEMMs, the weight gradient unfolding the input again (with
8-row products under 8 planes), the geometry remembered between calls; the remembered geometry
of the pooling modules, ReLU's blocks and nn.Linear's direct BLAS calls. Values
against numpy float64 references, batches spanning several chunks (a partial last one)."""
import numpy as np
import pytest

import luabridge
from nn_conv_helpers import N, T, field, forward, lua_fn, module

TYPES = [("double", np.float64, 1e-10), ("float", np.float32, 2e-4)]


def conv_ref(x, w, b, stride=(1, 1), pad=(0, 0), dil=(1, 1)):
    """out[n,o,y,x] = b[o] + sum w[o,c,i,j] * xpad[n,c,y*dH+i*lH,x*dW+j*lW], float64."""
    (dH, dW), (pH, pW), (lH, lW) = stride, pad, dil
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pH, pH), (pW, pW)))
    o, c, kH, kW = w.shape
    oH = (xp.shape[2] - (lH * (kH - 1) + 1)) // dH + 1
    oW = (xp.shape[3] - (lW * (kW - 1) + 1)) // dW + 1
    out = np.zeros((x.shape[0], o, oH, oW))
    for i in range(kH):
        for j in range(kW):
            win = xp[:, :, i * lH:i * lH + dH * (oH - 1) + 1:dH, j * lW:j * lW + dW * (oW - 1) + 1:dW]
            out += np.einsum("ncyx,oc->noyx", win, w[:, :, i, j].astype(np.float64))
    return out + (0 if b is None else b.astype(np.float64)[None, :, None, None])


def conv_grads_ref(x, w, g, stride=(1, 1), pad=(0, 0), dil=(1, 1)):
    """gradInput, gradWeight and gradBias of conv_ref for gradOutput g, float64."""
    (dH, dW), (pH, pW), (lH, lW) = stride, pad, dil
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pH, pH), (pW, pW)))
    gp = np.zeros_like(xp)
    g = g.astype(np.float64)
    o, c, kH, kW = w.shape
    oH, oW = g.shape[2], g.shape[3]
    gw = np.zeros(w.shape)
    for i in range(kH):
        for j in range(kW):
            sl = (slice(None), slice(None), slice(i * lH, i * lH + dH * (oH - 1) + 1, dH),
                  slice(j * lW, j * lW + dW * (oW - 1) + 1, dW))
            gw[:, :, i, j] = np.einsum("noyx,ncyx->oc", g, xp[sl])
            gp[sl] += np.einsum("noyx,oc->ncyx", g, w[:, :, i, j].astype(np.float64))
    gi = gp[:, :, pH:gp.shape[2] - pH, pW:gp.shape[3] - pW]
    return gi, gw, g.sum(axis=(0, 2, 3))


STEP = lua_fn("""function(m, x, g, scale)
  local out = m:forward(x):clone()
  local gi = m:updateGradInput(x, g)
  m:accGradParameters(x, g, scale)
  return out, gi and gi:clone()
end""")

CASES = [  # module, input shape (batch first), stride, pad, dilation
    ("nn.SpatialConvolution(1, 6, 5, 5)", (10, 1, 28, 28), (1, 1), (0, 0), (1, 1)),       # LeNet's
    ("nn.SpatialConvolution(6, 16, 5, 5)", (13, 6, 12, 12), (1, 1), (0, 0), (1, 1)),      # LeNet's
    ("nn.SpatialConvolution(3, 4, 3, 3, 1, 1, 1, 1)", (3, 3, 40, 40), (1, 1), (1, 1), (1, 1)),  # padded
    ("nn.SpatialConvolution(2, 3, 3, 2, 2, 3, 2, 1)", (5, 2, 30, 41), (3, 2), (1, 2), (1, 1)),  # strides
    ("nn.SpatialDilatedConvolution(2, 3, 3, 3, 1, 1, 1, 1, 2, 2)", (4, 2, 33, 33), (1, 1), (1, 1), (2, 2)),
    # one plane: the weight gradient's 8-row products read 7 images ahead (all but the last two)
    ("nn.SpatialConvolution(2, 1, 3, 3)", (9, 2, 6, 7), (1, 1), (0, 0), (1, 1)),
]


@pytest.mark.parametrize("type_name,dtype,atol", TYPES)
@pytest.mark.parametrize("expr,shape,stride,pad,dil", CASES)
@pytest.mark.parametrize("bias", [True, False])
def test_convolution_chunks(lua, rng, type_name, dtype, atol, expr, shape, stride, pad, dil, bias):
    m = module(f"{expr}:{type_name}()" + ("" if bias else ":noBias()"))
    w = N(field(m, "weight"))
    b = N(field(m, "bias")) if bias else None
    x = rng.standard_normal(shape).astype(dtype)
    want = conv_ref(x, w, b, stride, pad, dil)
    g = rng.standard_normal(want.shape).astype(dtype)
    # gradients accumulate onto what is there, scaled
    gw0 = rng.standard_normal(w.shape).astype(dtype)
    luabridge.to_numpy(field(m, "gradWeight"))[...] = gw0
    if bias:
        gb0 = rng.standard_normal(b.shape).astype(dtype)
        luabridge.to_numpy(field(m, "gradBias"))[...] = gb0
    out, gi = STEP(m, T(x), T(g), 0.5)
    gi_want, gw_want, gb_want = conv_grads_ref(x, w, g, stride, pad, dil)
    scale = max(1.0, np.abs(want).max())
    np.testing.assert_allclose(N(out), want, atol=atol * scale)
    np.testing.assert_allclose(N(gi), gi_want, atol=atol * scale)
    np.testing.assert_allclose(N(field(m, "gradWeight")), gw0 + 0.5 * gw_want, atol=atol * 10 * scale)
    if bias:
        np.testing.assert_allclose(N(field(m, "gradBias")), gb0 + 0.5 * gb_want, atol=atol * 10 * scale)
    # one image (3D input) goes the same way
    np.testing.assert_allclose(N(forward(m, T(x[0]))), want[0], atol=atol * scale)


def test_strided_operands(lua, rng):
    """A non-contiguous input, gradOutput, bias and gradBias (views with strides)."""
    m = module("nn.SpatialConvolution(2, 3, 3, 3)")
    x = rng.standard_normal((4, 2, 9, 7)).transpose(0, 1, 3, 2)
    setup = lua_fn("""function(m, bias, gradBias) m.bias, m.gradBias = bias, gradBias end""")
    bias_store = rng.standard_normal(6)
    gbias_store = np.zeros(6)
    tb, tgb = T(bias_store), T(gbias_store)
    strided = lua_fn("function(t) return t:unfold(1, 1, 2):select(2, 1) end")
    setup(m, strided(tb), strided(tgb))
    w, b = N(field(m, "weight")), bias_store[::2]
    want = conv_ref(x, w, b)
    g = rng.standard_normal(want.shape[::-1]).T    # a transposed gradOutput
    out, gi = STEP(m, T(x), T(g), 1)
    gi_want, gw_want, gb_want = conv_grads_ref(x, w, g)
    np.testing.assert_allclose(N(out), want, atol=1e-12)
    np.testing.assert_allclose(N(gi), gi_want, atol=1e-12)
    np.testing.assert_allclose(N(field(m, "gradWeight")), gw_want, atol=1e-12)
    np.testing.assert_allclose(gbias_store[::2], gb_want, atol=1e-12)
    np.testing.assert_array_equal(gbias_store[1::2], 0)


def test_rows_of_ones_kept_between_calls(lua, rng):
    """The columns' rows of ones (the bias) stay from one call to the next, and are made again
    after the buffer held blocks without them: a weight gradient without gradBias, the gradient
    of the input (conv.backward), padding (zeroed blocks), a larger batch (a grown buffer)."""
    m = module("nn.SpatialConvolution(2, 3, 3, 3)")
    w, b = N(field(m, "weight")), N(field(m, "bias"))
    run = lua_fn("""function(m, x, g, code)
      loadstring('local m, x, g = ...; ' .. code)(m, x, g)
      return m:forward(x):clone()
    end""")
    steps = [
        ((4, 2, 7, 8), 0, "m:forward(x); m:accGradParameters(x, g)"),
        ((4, 2, 7, 8), 0, "local gb = m.gradBias; m.gradBias = nil; m:accGradParameters(x, g); m.gradBias = gb"),
        ((4, 2, 7, 8), 0, "m:updateGradInput(x, g)"),
        ((4, 2, 7, 8), 1, "m:forward(x)"),
        ((4, 2, 7, 8), 0, "m:forward(x)"),
        ((30, 2, 7, 8), 0, "m:forward(x)"),
    ]
    set_pad = lua_fn("function(m, p) m.padW, m.padH = p, p end")
    for shape, pad, code in steps:
        set_pad(m, pad)
        x = rng.standard_normal(shape)
        want = conv_ref(x, w, b, pad=(pad, pad))
        g = rng.standard_normal(want.shape)
        np.testing.assert_allclose(N(run(m, T(x), T(g), code)), want, atol=1e-12)


def test_geometry_follows_sizes_and_settings(lua, rng):
    """The remembered geometry is made again when the input sizes, its type or the module's
    settings change."""
    m = module("nn.SpatialConvolution(2, 3, 3, 3)")
    w, b = N(field(m, "weight")), N(field(m, "bias"))
    set_pad = lua_fn("function(m, p) m.padW, m.padH = p, p end")
    for shape, pad in [((2, 2, 8, 8), 0), ((3, 2, 6, 9), 0), ((3, 2, 6, 9), 1), ((2, 6, 9), 1)]:
        set_pad(m, pad)
        x = rng.standard_normal(shape)
        batch = x if x.ndim == 4 else x[None]
        want = conv_ref(batch, w, b, pad=(pad, pad))
        np.testing.assert_allclose(N(forward(m, T(x))), want if x.ndim == 4 else want[0], atol=1e-12)
    as_float = lua_fn("function(m) return m:float() end")
    as_float(m)
    x = rng.standard_normal((2, 2, 6, 9)).astype(np.float32)
    np.testing.assert_allclose(N(forward(m, T(x))), conv_ref(x, w, b, pad=(1, 1)), atol=1e-4)


def test_errors(lua, rng):
    run = lua_fn("""function(code, x, g)
      local m = nn.SpatialConvolution(2, 3, 3, 3)
      loadstring('local m, x, g = ...; ' .. code)(m, x, g)
    end""")
    x, g = T(rng.standard_normal((2, 2, 5, 5))), T(rng.standard_normal((2, 3, 3, 3)))
    cases = [
        ("m.weight = torch.Tensor(3, 2, 3, 2); m:forward(x)", r"nn.SpatialConvolution: weight must be contiguous with 54 elements, got 3x2x3x2"),
        ("m.bias = torch.Tensor(4); m:forward(x)", r"nn.SpatialConvolution: bias must be a DoubleTensor vector of 3 elements, got torch.DoubleTensor of size 4"),
        ("m:forward(x); m.gradWeight = m.gradWeight:transpose(1, 2); m:accGradParameters(x, g)", r"nn.SpatialConvolution: gradWeight must be contiguous with 54 elements"),
        ("m:forward(x); m.gradBias = torch.FloatTensor(3); m:accGradParameters(x, g)", r"nn.SpatialConvolution: gradBias must be a DoubleTensor vector of 3 elements, got torch.FloatTensor"),
        ("m:forward(x); m:accGradParameters(x, g:narrow(4, 1, 2))", r"nn.SpatialConvolution: gradOutput of size 2x3x3x2 does not match the output size 2x3x3x3"),
        ("m:forward(x); m:updateGradInput(x, torch.FloatTensor(2, 3, 3, 3))", r"nn.SpatialConvolution: gradOutput is a torch.FloatTensor but the output is a torch.DoubleTensor"),
        ("m:forward(x); m:accGradParameters(x:narrow(3, 1, 4), g)", r"nn.SpatialConvolution: call updateOutput with this input before accGradParameters"),
    ]
    for code, message in cases:
        with pytest.raises(luabridge.LuaError, match=message):
            run(code, x, g)


def max_pool_ref(x, k, d):
    (kH, kW), (dH, dW) = k, d
    oH, oW = (x.shape[-2] - kH) // dH + 1, (x.shape[-1] - kW) // dW + 1
    out = np.full(x.shape[:-2] + (oH, oW), -np.inf)
    for i in range(kH):
        for j in range(kW):
            out = np.maximum(out, x[..., i:i + dH * (oH - 1) + 1:dH, j:j + dW * (oW - 1) + 1:dW])
    return out


def test_pooling_geometry_follows_settings(lua, rng):
    m = module("nn.SpatialMaxPooling(2, 2, 2, 2)")
    settings = lua_fn("function(m, k, d, ceil) m.kW, m.kH, m.dW, m.dH, m.ceil_mode = k, k, d, d, ceil end")
    for shape, k, d in [((3, 2, 8, 8), 2, 2), ((3, 2, 9, 7), 2, 2), ((3, 2, 9, 7), 3, 1), ((2, 9, 7), 3, 2)]:
        settings(m, k, d, False)
        x = rng.standard_normal(shape)
        np.testing.assert_array_equal(N(forward(m, T(x))), max_pool_ref(x, (k, k), (d, d)))
    settings(m, 2, 2, True)   # ceil: one more (clipped) window on each side of a 9x7 plane
    assert N(forward(m, T(rng.standard_normal((3, 2, 9, 7))))).shape == (3, 2, 5, 4)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [5, 8192, 30003])
def test_rectifier_blocks(lua, rng, dtype, n):
    """ReLU's passes over the float bits run block by block (8192 elements): sizes below, at and
    across a block, with a last partial block; the buffers grow and shrink between calls."""
    step = lua_fn("""function(m, x, g)
      local y = m:forward(x):clone()
      return y, m:backward(x, g):clone()
    end""")
    m = module("nn.ReLU():float()" if dtype == np.float32 else "nn.ReLU()")
    for size in (n, 7, n):
        x = rng.standard_normal(size).astype(dtype)
        x[::7] = 0
        x[1::11] = -0.0
        g = rng.standard_normal(size).astype(dtype)
        y, gi = step(m, T(x), T(g))
        np.testing.assert_array_equal(N(y), np.maximum(x, 0))
        np.testing.assert_array_equal(N(gi), np.where(x > 0, g, 0))


LINEAR_STEP = lua_fn("""function(m, x, g, scale)
  local y = m:forward(x):clone()
  local gi = m:updateGradInput(x, g):clone()
  m:accGradParameters(x, g, scale)
  return y, gi
end""")


@pytest.mark.parametrize("type_name,dtype,atol", TYPES)
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_linear_batch(lua, rng, type_name, dtype, atol, bias, layout):
    """nn.Linear's batch passes: BLAS on the buffers when every operand is contiguous, the
    tensor ops otherwise; the same values, gradients accumulated and scaled."""
    m = module(f"nn.Linear(7, 5, {'true' if bias else 'false'}):{type_name}()")
    w = N(field(m, "weight")).astype(np.float64)
    b = N(field(m, "bias")).astype(np.float64) if bias else np.zeros(5)
    x = rng.standard_normal((6, 7)).astype(dtype)
    g = rng.standard_normal((6, 5)).astype(dtype)
    if layout == "transposed":
        x, g = np.asfortranarray(x), np.asfortranarray(g)   # column-major: the tensor ops
    gw0 = rng.standard_normal((5, 7)).astype(dtype)
    luabridge.to_numpy(field(m, "gradWeight"))[...] = gw0
    if bias:
        luabridge.to_numpy(field(m, "gradBias"))[...] = 1
    y, gi = LINEAR_STEP(m, T(x), T(g), 0.25)
    x64, g64 = x.astype(np.float64), g.astype(np.float64)
    np.testing.assert_allclose(N(y), x64 @ w.T + b, atol=atol * 10)
    np.testing.assert_allclose(N(gi), g64 @ w, atol=atol * 10)
    np.testing.assert_allclose(N(field(m, "gradWeight")), gw0 + 0.25 * g64.T @ x64, atol=atol * 10)
    if bias:
        np.testing.assert_allclose(N(field(m, "gradBias")), 1 + 0.25 * g64.sum(axis=0), atol=atol * 10)


def test_linear_fallbacks(lua, rng):
    """A transposed weight, a gradBias of another size and a mixed-type ones buffer leave the
    BLAS path: values from the tensor ops, or their errors."""
    run = lua_fn("""function(code, x, g)
      local m = nn.Linear(4, 3)
      return loadstring('local m, x, g = ...; ' .. code)(m, x, g)
    end""")
    x, g = rng.standard_normal((2, 4)), rng.standard_normal((2, 3))
    w = rng.standard_normal((4, 3))
    setw = lua_fn("function(m, w) m.weight = w:t(); m.bias:zero(); return m end")
    m = setw(module("nn.Linear(4, 3)"), T(w))
    np.testing.assert_allclose(N(forward(m, T(x))), x @ w, atol=1e-12)
    with pytest.raises(luabridge.LuaError, match="size mismatch"):
        run("m.gradBias = torch.Tensor(4); m:forward(x); m:accGradParameters(x, g)", T(x), T(g))
    with pytest.raises(luabridge.LuaError, match="expected torch.DoubleTensor, got torch.FloatTensor"):
        run("m.addBuffer = torch.FloatTensor(2):fill(1); m:forward(x)", T(x), T(g))


@pytest.mark.parametrize("expr,shape", [
    ("nn.SpatialConvolution(2, 3, 2, 2, 3, 3)", (3, 2, 11, 10)),   # gaps between the windows
    ("nn.SpatialConvolution(6, 16, 5, 5)", (13, 6, 12, 12)),       # LeNet's, several chunks
])
def test_gradinput_overwritten(lua, rng, expr, shape):
    """updateGradInput writes every element of gradInput (zero where no window reads the input):
    nothing is left of what the buffer held."""
    m = module(expr)
    w = N(field(m, "weight"))
    x = rng.standard_normal(shape)
    out = N(forward(m, T(x)))
    grad_in = lua_fn("""function(m, x, g)
      m.gradInput:resizeAs(x):fill(7)
      return m:updateGradInput(x, g):clone()
    end""")
    stride = (3, 3) if "3, 3)" in expr else (1, 1)
    for _ in range(2):
        g = rng.standard_normal(out.shape)
        np.testing.assert_allclose(N(grad_in(m, T(x), T(g))), conv_grads_ref(x, w, g, stride)[0], atol=1e-12)


# Max pooling with NaN and infinities: every index stays inside its window (the backward pass
# writes at the indices), a NaN wins its window as in torch7, a window of -inf keeps its first tap.
@pytest.mark.parametrize("ctor", ["nn.SpatialMaxPooling(2, 2, 2, 2)",                # unrolled, tiling
                                  "nn.SpatialMaxPooling(3, 3, 2, 2)",                # unrolled
                                  "nn.SpatialMaxPooling(3, 3, 2, 2, 1, 1):ceil()"])  # tap walk
def test_max_pooling_nan_and_inf(ctor, rng):
    m = module(ctor)
    x = rng.standard_normal((2, 3, 8, 8))
    x.flat[rng.choice(x.size, 40, replace=False)] = np.nan
    x.flat[rng.choice(x.size, 40, replace=False)] = np.inf
    x[0, 0, :4, :4] = -np.inf                       # whole windows of -inf
    x[1, 2, 2, 3] = np.nan
    out = N(forward(m, T(x))).copy()
    idx = N(field(m, "indices")).astype(np.int64)
    k, d, pad = (2, 2, 0) if "(2, 2" in ctor else (3, 2, 1 if "ceil" in ctor else 0)
    planes = x.reshape(-1, 64)
    for p in range(planes.shape[0]):
        for oy in range(out.shape[2]):
            for ox in range(out.shape[3]):
                y0, x0 = oy * d - pad, ox * d - pad
                taps = [(y, xx) for y in range(max(y0, 0), min(y0 + k, 8)) for xx in range(max(x0, 0), min(x0 + k, 8))]
                flat = [y * 8 + xx for y, xx in taps]
                i = idx.reshape(-1, *out.shape[2:])[p, oy, ox] - 1
                assert i in flat                        # inside its own window
                vals = planes[p, flat]
                got = out.reshape(-1, *out.shape[2:])[p, oy, ox]
                if np.isnan(vals).any():
                    assert np.isnan(got) and i == flat[np.flatnonzero(np.isnan(vals))[-1]]
                else:
                    assert got == vals.max() and i == flat[int(np.argmax(vals))]
    grad = luabridge.to_numpy(lua_fn("function(m, x, g) return m:backward(x, g) end")(
        m, luabridge.from_numpy(x), luabridge.from_numpy(np.ones_like(out)))).copy()
    assert grad.sum() == out.size                   # every window's gradient landed somewhere


def test_max_pooling_refuses_changed_indices(rng):
    m = module("nn.SpatialMaxPooling(2, 2, 2, 2)")
    x = rng.standard_normal((1, 4, 4))
    out = N(forward(m, T(x))).copy()
    luabridge.to_numpy(field(m, "indices"))[0, 0, 0] = 10**9
    with pytest.raises(luabridge.LuaError, match=r"indices outside 1\.\.16"):
        lua_fn("function(m, x, g) return m:backward(x, g) end")(
            m, luabridge.from_numpy(x), luabridge.from_numpy(np.ones_like(out)))


def test_unpooling_ignores_indices_outside_the_plane(rng):
    # indices is the pooling's public field: values outside the plane must never be written through
    pool, unpool = lua_fn("""function()
      require "nn"
      local p = nn.SpatialMaxPooling(2, 2, 2, 2)
      return p, nn.SpatialMaxUnpooling(p) end""")()
    x = rng.standard_normal((1, 4, 4))
    y = N(forward(pool, T(x)))
    idx = luabridge.to_numpy(field(pool, "indices"))
    idx[0, 0, 0], idx[0, 1, 1] = 10**12, -5
    good = [(0, 1), (1, 0)]
    out = N(forward(unpool, T(y)))
    assert out.shape == (1, 4, 4) and np.count_nonzero(out) == 2   # the two bad entries dropped
    for i, j in good:   # the others land where the (1-based) indices say
        assert out.flat[idx[0, i, j] - 1] == y[0, i, j]
