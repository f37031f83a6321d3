"""Fast paths of the MLP training step: ReLU on float bits, LogSoftMax row loops, zero as a
memset, in-place add(value, tensor) through BLAS axpy, and the buffer address from Python."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest

import luabridge
from luabridge.core.memory import BufferRegistry

TYPES = [("Float", np.float32), ("Double", np.float64)]


@pytest.fixture(scope="module")
def nn():
    luabridge.require("nn")
    return luabridge


def T(a: np.ndarray):  # noqa: N802
    return luabridge.from_numpy(a)


def N(t) -> np.ndarray:  # noqa: N802
    return luabridge.to_numpy(t).copy()


def signed_values(rng, shape, dtype) -> np.ndarray:
    """Random values with both zeros, both infinities and tiny (subnormal) numbers mixed in."""
    x = rng.standard_normal(shape).astype(dtype)
    flat = x.reshape(-1)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.finfo(dtype).smallest_subnormal,
                        -np.finfo(dtype).smallest_subnormal], dtype=dtype)
    flat[: special.size] = special
    return x


RELU_STEP = """function(name, x, g, inplace)
  local m = nn[name](0, 0, inplace)
  if name == 'ReLU' then m = nn.ReLU(inplace) end
  m = m:type(torch.type(x))
  local xin = inplace and x:clone() or x
  local y = m:forward(xin):clone()
  local gi = m:backward(xin, g:clone()):clone()
  return y, gi
end"""


@pytest.mark.parametrize("type_name,dtype", TYPES)
@pytest.mark.parametrize("name", ["ReLU", "Threshold"])
@pytest.mark.parametrize("inplace", [False, True])
def test_rectifier_values(nn, rng, type_name, dtype, name, inplace):
    x = signed_values(rng, (7, 33), dtype)
    g = rng.standard_normal((7, 33)).astype(dtype)
    y, gi = nn.eval(RELU_STEP)(name, T(x), T(g), inplace)
    want_y = np.where(x > 0, x, 0).astype(dtype)
    y = N(y)
    np.testing.assert_array_equal(y, want_y)
    assert not np.signbit(y).any()  # -0 and negatives give +0, as torch7's x > 0 and x or 0
    np.testing.assert_array_equal(N(gi), np.where(x > 0, g, 0))


@pytest.mark.parametrize("type_name,dtype", TYPES)
def test_rectifier_layouts_and_sizes(nn, rng, type_name, dtype):
    step = nn.eval(RELU_STEP)
    for shape in [(0,), (1,), (5,), (3, 4, 5)]:
        x = rng.standard_normal(shape).astype(dtype)
        if x.size >= 6:
            x = signed_values(rng, shape, dtype)
        g = rng.standard_normal(shape).astype(dtype)
        y, gi = step("ReLU", T(x), T(g), False)
        np.testing.assert_array_equal(N(y).reshape(shape), np.where(x > 0, x, 0))
        np.testing.assert_array_equal(N(gi).reshape(shape), np.where(x > 0, g, 0))
    base = rng.standard_normal((6, 9)).astype(dtype)
    gbase = rng.standard_normal((6, 9)).astype(dtype)
    x, g = base.T, gbase.T  # non-contiguous: the tensor-op path
    y, gi = step("ReLU", T(x), T(g), False)
    np.testing.assert_array_equal(N(y), np.where(x > 0, x, 0))
    np.testing.assert_array_equal(N(gi), np.where(x > 0, g, 0))


def test_rectifier_size_change_and_type_change(nn, rng):
    """The zero buffer follows the element count; a :type() change remakes the buffers."""
    f = nn.eval("""function(xs, gs)
      local m, out = nn.ReLU(), {}
      for i = 1, #xs do
        m:forward(xs[i]); out[i] = m:backward(xs[i], gs[i]):clone()
        if i == 2 then m:float() end
      end
      return out
    end""")
    xs = [rng.standard_normal(s) for s in [(4, 5), (2, 3)]] + [rng.standard_normal((3, 3)).astype(np.float32)]
    gs = [rng.standard_normal(x.shape).astype(x.dtype) for x in xs]
    table = nn.eval("function(...) return {...} end")
    out = f(table(*[T(x) for x in xs]), table(*[T(g) for g in gs]))
    for i, (x, g) in enumerate(zip(xs, gs)):
        np.testing.assert_array_equal(N(out[i + 1]), np.where(x > 0, g, 0))


def test_threshold_nonzero_keeps_its_path(nn, rng):
    x = rng.standard_normal((4, 6))
    g = rng.standard_normal((4, 6))
    f = nn.eval("""function(x, g)
      local m = nn.Threshold(0.5, 0.5)
      return m:forward(x):clone(), m:backward(x, g):clone()
    end""")
    y, gi = f(T(x), T(g))
    np.testing.assert_array_equal(N(y), np.maximum(x, 0.5))
    np.testing.assert_array_equal(N(gi), np.where(x > 0.5, g, 0))


def log_softmax_ref(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    shifted = x - x.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


LSM_STEP = """function(x, g)
  local m = nn.LogSoftMax():type(torch.type(x))
  return m:forward(x):clone(), m:backward(x, g):clone()
end"""


@pytest.mark.parametrize("type_name,dtype", TYPES)
@pytest.mark.parametrize("shape", [(7,), (1, 10), (13, 10), (5, 300)])
def test_log_softmax_rows(nn, rng, type_name, dtype, shape):
    x = (rng.standard_normal(shape) * 5).astype(dtype)
    x.reshape(-1)[0] += 80  # far from the others: needs the max shift
    g = rng.standard_normal(shape).astype(dtype)
    y, gi = nn.eval(LSM_STEP)(T(x), T(g))
    want = log_softmax_ref(x)
    want_gi = g - np.exp(want) * g.astype(np.float64).sum(axis=-1, keepdims=True)
    rtol, atol = (1e-5, 1e-5) if dtype == np.float32 else (1e-12, 1e-12)
    np.testing.assert_allclose(N(y), want, rtol=rtol, atol=atol)
    np.testing.assert_allclose(N(gi), want_gi, rtol=rtol, atol=atol)


@pytest.mark.parametrize("type_name,dtype", TYPES)
def test_log_softmax_other_layouts_and_empty(nn, rng, type_name, dtype):
    step = nn.eval(LSM_STEP)
    x = rng.standard_normal((10, 6)).astype(dtype).T  # non-contiguous: tensor ops
    g = rng.standard_normal((10, 6)).astype(dtype).T
    y, gi = step(T(x), T(g))
    want = log_softmax_ref(x)
    np.testing.assert_allclose(N(y), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(N(gi), g - np.exp(want) * g.sum(axis=-1, keepdims=True), rtol=1e-5, atol=1e-5)
    y, gi = step(T(np.zeros((0, 4), dtype)), T(np.zeros((0, 4), dtype)))
    assert N(y).shape == (0, 4) and N(gi).shape == (0, 4)


def test_log_softmax_grad_in_place(nn, rng):
    """gradInput may be gradOutput itself."""
    x, g = rng.standard_normal((3, 5)), rng.standard_normal((3, 5))
    gi = nn.eval("""function(x, g)
      local m = nn.LogSoftMax()
      m:forward(x)
      m.gradInput = g
      return m:updateGradInput(x, g):clone()
    end""")(T(x), T(g.copy()))
    want = log_softmax_ref(x)
    np.testing.assert_allclose(N(gi), g - np.exp(want) * g.sum(axis=-1, keepdims=True), rtol=1e-12)


def test_log_softmax_errors(nn):
    with pytest.raises(luabridge.LuaError, match="gradOutput size 3x4 does not match input size 3x5"):
        nn.execute("local m = nn.LogSoftMax(); local x = torch.randn(3, 5); m:forward(x); "
                   "m:backward(x, torch.randn(3, 4))")


@pytest.mark.parametrize("type_name,dtype", TYPES + [("Half", np.float16), ("Int", np.int32)])
def test_zero_contiguous_and_views(nn, rng, type_name, dtype):
    a = (rng.standard_normal((6, 8)) * 10).astype(dtype)
    f = nn.eval("""function(a)
      local t = a:clone()
      local whole = t:clone():zero()
      t:narrow(1, 2, 3):zero()          -- contiguous rows inside a larger storage
      t:select(2, 4):zero()             -- strided column
      return t, whole
    end""")
    got, whole = f(T(a))
    want = a.copy()
    want[1:4] = 0
    want[:, 3] = 0
    np.testing.assert_array_equal(N(got), want)
    np.testing.assert_array_equal(N(whole), np.zeros_like(a))


@pytest.mark.parametrize("type_name,dtype", TYPES)
def test_add_scaled_in_place(nn, rng, type_name, dtype):
    a = rng.standard_normal(1000).astype(dtype)
    b = rng.standard_normal(1000).astype(dtype)
    f = nn.eval("""function(a, b)
      local x = a:clone()
      local r1 = x:clone():add(-0.25, b)                -- in place, apart
      local r2 = x:clone(); r2:add(3, r2)                  -- b is r itself
      local r3 = x:clone(); r3:narrow(1, 1, 999):add(2, r3:narrow(1, 2, 999))  -- overlapping
      local r4 = torch.add(x:clone(), -0.25, b)             -- a result apart from a
      local m = x:clone():resize(20, 50)
      local r5 = m:t():add(0.5, b:clone():resize(50, 20))  -- transposed: the loop path
      return r1, r2, r3, r4, r5
    end""")
    r1, r2, r3, r4, r5 = (N(t) for t in f(T(a), T(b)))
    rtol = 1e-6 if dtype == np.float32 else 1e-14
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    np.testing.assert_allclose(r1, a64 - 0.25 * b64, rtol=rtol, atol=rtol)
    np.testing.assert_allclose(r2, 4 * a64, rtol=rtol)
    want3 = a64.copy()
    want3[:999] = a64[:999] + 2 * a64[1:]
    np.testing.assert_allclose(r3, want3, rtol=rtol, atol=rtol)
    np.testing.assert_allclose(r4, a64 - 0.25 * b64, rtol=rtol, atol=rtol)
    np.testing.assert_allclose(r5, a64.reshape(20, 50).T + 0.5 * b64.reshape(50, 20), rtol=rtol, atol=rtol)


def test_add_scaled_errors_leave_operand(nn):
    with pytest.raises(luabridge.LuaError, match=r"add: inconsistent tensor size, 4 \(4 elements\) and 5"):
        nn.execute("torch.FloatTensor(4):add(2, torch.FloatTensor(5))")
    f = nn.eval("function(a) local ok = pcall(function() a:add(2, torch.ones(5)) end); return ok, a end")
    a = np.arange(4.0)
    ok, t = f(T(a.copy()))
    assert ok is False
    np.testing.assert_array_equal(N(t), a)


@pytest.mark.parametrize("n,type_name", [(1, "Float"), (0, "Double"), (1000, "Byte"), (3 << 18, "Float")])
def test_registry_address_is_the_data_pointer(n, type_name):
    r = BufferRegistry()
    buffer_id, hi, lo = r.alloc(n, type_name)
    array = r.array(buffer_id)
    assert (hi << 32) + lo == array.ctypes.data
    assert not array.any()
    ctypes.memset((hi << 32) + lo, 7, array.nbytes)  # the whole buffer is writable there
    assert (array.view(np.uint8) == 7).all()
    r.release(str(buffer_id))
    assert len(r) == 0


def test_zero_empty_tensors(nn):
    f = nn.eval("function() return torch.FloatTensor():zero():nElement(), "
                "torch.DoubleTensor(0, 3):zero():nElement() end")
    assert tuple(f()) == (0, 0)


def test_mlp_step_without_input_gradient(nn, rng):
    """The bench's step: with the first Linear's gradInput nil, backward skips that product and
    the parameter update is the same as with it."""
    x = rng.standard_normal((6, 8))
    y = rng.integers(1, 4, 6).astype(np.float64)
    f = nn.eval("""function(x, y, skip)
      torch.manualSeed(7)
      local model = nn.Sequential():add(nn.Linear(8, 5)):add(nn.ReLU())
        :add(nn.Linear(5, 3)):add(nn.LogSoftMax())
      local crit = nn.ClassNLLCriterion()
      if skip then model.modules[1].gradInput = nil end
      local params, grads = model:getParameters()
      local before = params:clone()
      grads:zero()
      local out = model:forward(x)
      crit:forward(out, y)
      local gi = model:backward(x, crit:backward(out, y))
      params:add(-0.1, grads)
      return before, params:clone(), gi
    end""")
    before, full, gi_full = f(T(x), T(y), False)
    _, skipped, gi_skipped = f(T(x), T(y), True)
    p = N(before)
    w1, b1, w2, b2 = p[:40].reshape(5, 8), p[40:45], p[45:60].reshape(3, 5), p[60:63]
    h = x @ w1.T + b1
    a = np.maximum(h, 0)
    z = a @ w2.T + b2
    prob = np.exp(z - z.max(1, keepdims=True))
    prob /= prob.sum(1, keepdims=True)
    dz = prob.copy()
    dz[np.arange(6), y.astype(int) - 1] -= 1
    dz /= 6
    da = dz @ w2
    dh = da * (h > 0)
    grads = np.concatenate([(dh.T @ x).ravel(), dh.sum(0), (dz.T @ a).ravel(), dz.sum(0)])
    np.testing.assert_allclose(N(full), p - 0.1 * grads, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(N(gi_full), dh @ w1, rtol=1e-12, atol=1e-12)
    assert gi_skipped is None
    np.testing.assert_array_equal(N(skipped), N(full))


THRESHOLD_STEP = """function(th, v, x, g)
  local m = nn.Threshold(th, v):type(torch.type(x))
  return m:forward(x):clone(), m:backward(x, g):clone()
end"""


@pytest.mark.parametrize("type_name,dtype", TYPES)
@pytest.mark.parametrize("th,v", [(0.25, 0.25), (0.25, -1.0), (-0.5, -0.5)])
def test_threshold_nonzero(nn, rng, type_name, dtype, th, v):
    """A nonzero threshold: max(x, th) or a fill, and the gradient where x > th (its passes run
    on x - th); values at, just beside and far from the threshold, infinities included."""
    x = signed_values(rng, (9, 40), dtype)
    t = dtype(th)
    flat = x.reshape(-1)
    flat[6:10] = [t, np.nextafter(t, dtype(np.inf)), np.nextafter(t, dtype(-np.inf)), -t]
    g = rng.standard_normal(x.shape).astype(dtype)
    y, gi = nn.eval(THRESHOLD_STEP)(th, v, T(x), T(g))
    np.testing.assert_array_equal(N(y), np.where(x > t, x, dtype(v)))
    np.testing.assert_array_equal(N(gi), np.where(x > t, g, 0))
