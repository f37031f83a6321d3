"""The CUDA backend (lua/torch/backend/cuda/ + luabridge/backend/cuda.py).

Every test runs twice: with numpy standing in for CuPy (forced for the test, so it runs on any
machine) and with CuPy on a real device (`-k cupy`; skipped with the reason when CuPy or a device
is missing). Results are compared with numpy float64 references computed from the host inputs.
"""
from __future__ import annotations

import gc
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import luabridge
from luabridge.providers.torch_cuda import arrays as cuda
from luabridge.core.runtime import bridge
from helpers import assert_lua_errors, cupy_or_skip, lua_fn as L   # L("function(t) ... end")(t)

CUDA_TYPE = {np.float32: "torch.CudaTensor", np.float64: "torch.CudaDoubleTensor",
             np.int64: "torch.CudaLongTensor", np.uint8: "torch.CudaByteTensor", np.int32: "torch.CudaIntTensor"}


@pytest.fixture(params=["numpy", "cupy"])
def xp(request, lua):
    module = np if request.param == "numpy" else cupy_or_skip()
    cuda.use_array_module(module)
    yield module
    cuda.use_array_module(None)


def dev(a: np.ndarray, type_name: str | None = None):
    """A CUDA tensor with a's values (uploaded from a CPU tensor)."""
    a = np.ascontiguousarray(a)
    return L("function(t, ty) return t:type(ty) end")(luabridge.from_numpy(a), type_name or CUDA_TYPE[a.dtype.type])


def transposed(a: np.ndarray):
    """A non-contiguous CUDA view with a's values (the transpose of an uploaded a.T)."""
    return L("function(t) return t:t() end")(dev(np.ascontiguousarray(a.T)))


def narrowed(a: np.ndarray):
    """A non-contiguous CUDA view with a's values (columns 2..n+1 of a wider tensor)."""
    pad = np.zeros((a.shape[0], a.shape[1] + 2), dtype=a.dtype)
    pad[:, 1:-1] = a
    return L("function(t, n) return t:narrow(2, 2, n) end")(dev(pad), a.shape[1])


LAYOUTS = {"contiguous": dev, "transposed": transposed, "narrowed": narrowed}


def host(t) -> np.ndarray:
    """A CUDA tensor's values as a numpy array (a copy)."""
    return np.array(cuda.to_host(luabridge.to_numpy(t)))


def f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def close(t, ref, rtol=2e-5, atol=2e-5):
    np.testing.assert_allclose(host(t), ref, rtol=rtol, atol=atol)


# ----------------------------------------------------------------------------------------------
# types, constructors, structure

def test_types_and_constructors(xp):
    assert L("function() return torch.type(torch.CudaTensor(2, 3)) end")() == "torch.CudaTensor"
    for ty, dt in [("CudaTensor", np.float32), ("CudaDoubleTensor", np.float64),
                   ("CudaLongTensor", np.int64), ("CudaByteTensor", np.uint8), ("CudaHalfTensor", np.float16)]:
        t = L(f"function() return torch.{ty}(2, 3) end")()
        a = host(t)
        assert a.dtype == dt and a.shape == (2, 3) and not a.any()
        assert L("function(t) return torch.typename(t:storage()) end")(t) == "torch." + ty.replace("Tensor", "Storage")
    t = L("function() return torch.CudaTensor({{1, 2, 3}, {4, 5, 6}}) end")()
    np.testing.assert_array_equal(host(t), [[1, 2, 3], [4, 5, 6]])
    assert L("function(t) return t._device, t:dim(), t:size(2), t:nElement(), t:isContiguous() end")(t) == \
        ("cuda", 2, 3, 6, True)
    assert L("function() return torch.CudaTensor():dim() end")() == 0
    assert L("function() return torch.isTensor(torch.CudaTensor(1)) end")()


def test_structure_methods_share_the_storage(xp, rng):
    a = f32(rng, 4, 5)
    t = dev(a)
    views = L("""function(t)
      return t:t(), t:narrow(1, 2, 2), t:select(2, 3), t:view(5, 4), t:sub(2, 3, 1, -2),
             t:narrow(2, 1, 1):expand(4, 3), t:unsqueeze(1), t:transpose(1, 2):contiguous()
    end""")(t)
    refs = [a.T, a[1:3], a[:, 2], a.reshape(5, 4), a[1:3, 0:4], np.broadcast_to(a[:, :1], (4, 3)), a[None], a.T]
    for v, ref in zip(views, refs):
        assert L("function(v) return torch.type(v), v._device end")(v) == ("torch.CudaTensor", "cuda")
        np.testing.assert_array_equal(host(v), ref)
    L("function(t) t:select(2, 3):fill(7) end")(t)
    np.testing.assert_array_equal(host(t)[:, 2], 7)


def test_zero_size_and_empty(xp):
    t = L("function() return torch.CudaTensor(0, 3) end")()
    assert host(t).shape == (0, 3)
    assert L("function(t) return t:sum(), t:clone():add(1):nElement() end")(t) == (0, 0)
    assert host(L("function() return torch.CudaTensor(3, 0):sum(2) end")()).shape == (3, 1)
    assert L("function() return torch.CudaTensor():nElement() end")() == 0


# ----------------------------------------------------------------------------------------------
# copies between the host and the device

@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_copies_cpu_gpu_and_across_types(xp, rng, layout):
    a = (rng.standard_normal((3, 4)) * 10).astype(np.float32)
    t = LAYOUTS[layout](a)
    back = L("function(t) return t:float(), t:double(), t:long(), t:cudaDouble(), t:cudaLong(), t:cudaByte() end")(t)
    np.testing.assert_array_equal(luabridge.to_numpy(back[0]), a)
    np.testing.assert_array_equal(luabridge.to_numpy(back[1]), a.astype(np.float64))
    np.testing.assert_array_equal(luabridge.to_numpy(back[2]), a.astype(np.int64))
    np.testing.assert_array_equal(host(back[3]), a.astype(np.float64))
    np.testing.assert_array_equal(host(back[4]), a.astype(np.int64))
    np.testing.assert_array_equal(host(back[5]), a.astype(np.int64).astype(np.uint8))
    # into non-contiguous destinations, both ways
    cpu_t = L("function(t) local r = torch.FloatTensor(4, 3):t(); r:copy(t); return r end")(t)
    np.testing.assert_array_equal(luabridge.to_numpy(cpu_t), a)
    d = L("function(c) local r = torch.CudaDoubleTensor(4, 3):t(); r:copy(c); return r end")(luabridge.from_numpy(a))
    np.testing.assert_array_equal(host(d), a)
    assert L("function(t) return torch.type(t:type('torch.CudaTensor')), t:type('torch.CudaTensor') == t end")(t) == \
        ("torch.CudaTensor", True)


def test_storage(xp):
    s = L("function() local s = torch.CudaStorage(4):fill(2); s[3] = 5; return s end")()
    assert L("function(s) return s[3], s:size() end")(s) == (5, 4)
    assert list(L("function(s) return s:totable() end")(s).values()) == [2, 2, 5, 2]
    r = L("function(s) s:resize(6); return s:totable() end")(s)
    assert list(r.values()) == [2, 2, 5, 2, 0, 0]
    cpu = L("function(s) local c = torch.FloatStorage(6); c:copy(s); return c:totable() end")(s)
    assert list(cpu.values()) == [2, 2, 5, 2, 0, 0]
    back = L("function() local s = torch.CudaStorage({1, 2, 3}); return torch.CudaTensor(s, 2, 2) end")()
    np.testing.assert_array_equal(host(back), [2, 3])
    assert "[torch.CudaStorage of size 4]" in L("function() return tostring(torch.CudaStorage(4)) end")()
    conv = L("""function()
      local c = torch.FloatStorage({1.5, -2}):type('torch.CudaDoubleStorage')
      return torch.type(c), c:type('torch.LongStorage'):totable(), torch.CudaByteStorage():string('hi'):string(),
             torch.CudaStorage(3, 7):totable()
    end""")()
    assert conv[0] == "torch.CudaDoubleStorage"
    assert list(conv[1].values()) == [1, -2] and conv[2] == "hi" and list(conv[3].values()) == [7, 7, 7]


def test_element_access(xp, rng):
    a = f32(rng, 3, 4)
    t = transposed(a)
    assert L("function(t) return t[2][3], t[{3, 4}], t[{-1, -1}] end")(t) == \
        pytest.approx((a[1, 2], a[2, 3], a[-1, -1]))
    L("function(t) t[{1, 2}] = 9; t[3] = 4; t[2][1] = -1 end")(t)
    a[0, 1], a[2], a[1, 0] = 9, 4, -1
    np.testing.assert_array_equal(host(t), a)
    assert L("function(t) return t:select(2, 1)[2] end")(t) == -1
    assert list(L("function(t) return t:totable() end")(t)[1].values()) == pytest.approx(a[0].tolist())


def test_element_access_and_host_copies_go_through_the_op_table(xp, rng):
    """t[i], t[i] = v, totable, printing and copies to the host reach the data through the ops of
    backend.cuda (counted here), with the values numpy has."""
    a = f32(rng, 3, 4)
    counted = L("""function(t)
      local ops = require('torch.backend').cuda
      local counts, saved = {}, {}
      for _, name in ipairs { 'item', 'fill', 'copy' } do
        saved[name] = rawget(ops, name)
        counts[name] = 0
        rawset(ops, name, function(...) counts[name] = counts[name] + 1; return saved[name](...) end)
      end
      local ok, got = pcall(function()
        local v = t[{2, 3}]
        t[{1, 4}] = -7
        return { v, t:totable()[1][4], tostring(t), torch.FloatTensor(3, 4):copy(t)[1][4] }
      end)
      for name, fn in pairs(saved) do rawset(ops, name, fn) end
      assert(ok, got)
      return got, counts
    end""")(dev(a))
    values, counts = counted   # Lua tables: values[1] is the first
    a[0, 3] = -7
    assert values[1] == pytest.approx(a[1, 2]) and values[2] == values[4] == -7
    assert values[3] == L("function(t) return tostring(t) end")(luabridge.from_numpy(a)).replace(
        "torch.FloatTensor", "torch.CudaTensor")
    assert dict(counts.items()) == {"item": 1, "fill": 1, "copy": 3}


def test_tensor_keys_index_as_on_the_cpu(xp, rng):
    """t[mask], t[idx] and their assignments with CUDA keys take the CPU's indexing code."""
    a = f32(rng, 4, 3)
    picked, rows, zeroed, sevens = L("""function(t)
      local m, i = t:gt(0), torch.LongTensor({3, 1}):cudaLong()
      local c, d = t:clone(), t:clone()
      c[m] = 0
      d[i] = torch.CudaTensor(2, 3):fill(7)
      return t[m], t[i], c, d
    end""")(dev(a))
    np.testing.assert_array_equal(host(picked), a[a > 0])
    np.testing.assert_array_equal(host(rows), a[[2, 0]])
    np.testing.assert_array_equal(host(zeroed), np.where(a > 0, 0, a))
    ref = a.copy()
    ref[[2, 0]] = 7
    np.testing.assert_array_equal(host(sevens), ref)


def test_printing_matches_the_cpu(xp, rng):
    for a in [f32(rng, 3, 4) * 100, np.arange(6, dtype=np.float32), f32(rng, 2, 2, 3)]:
        cpu = L("function(t) return tostring(t) end")(luabridge.from_numpy(a))
        gpu = L("function(t) return tostring(t) end")(dev(a))
        assert gpu == cpu.replace("torch.FloatTensor", "torch.CudaTensor")
    assert L("function() return tostring(torch.CudaTensor()) end")() == "[torch.CudaTensor with no dimension]\n"


# ----------------------------------------------------------------------------------------------
# pointwise ops

POSITIVE = lambda x: np.abs(x) + 0.1  # noqa: E731
UNIT = lambda x: np.tanh(x) * 0.9  # noqa: E731
# name -> (map of the random inputs into the function's domain, float64 reference)
UNARY = {
    "exp": (None, np.exp), "log": (POSITIVE, np.log), "log1p": (POSITIVE, np.log1p), "sqrt": (POSITIVE, np.sqrt),
    "rsqrt": (POSITIVE, lambda x: 1 / np.sqrt(x)), "sin": (None, np.sin), "cos": (None, np.cos),
    "tan": (UNIT, np.tan), "asin": (UNIT, np.arcsin), "acos": (UNIT, np.arccos), "atan": (None, np.arctan),
    "sinh": (None, np.sinh), "cosh": (None, np.cosh), "tanh": (None, np.tanh),
    "sigmoid": (None, lambda x: 1 / (1 + np.exp(-x))), "floor": (None, np.floor), "ceil": (None, np.ceil),
    "round": (None, lambda x: np.sign(x) * np.floor(np.abs(x) + 0.5)), "trunc": (None, np.trunc),
    "frac": (None, lambda x: x - np.trunc(x)), "cinv": (POSITIVE, lambda x: 1 / x), "abs": (None, np.abs),
    "sign": (None, np.sign), "neg": (None, np.negative),
}


@pytest.mark.parametrize("name", list(UNARY))
def test_unary(xp, rng, name):
    domain, reference = UNARY[name]
    a = f32(rng, 3, 5) * 2
    a[0, :2] = [0.5, -2.5]   # halves: C's round goes away from zero
    a = domain(a).astype(np.float32) if domain else a
    ref = reference(a.astype(np.float64))
    t = transposed(a)
    method, fn, into = L(f"""function(t)
      local r = torch.CudaTensor(2)
      torch.{name}(r, t)
      return t:clone():{name}(), torch.{name}(t), r
    end""")(t)
    for r in (method, fn, into):
        close(r, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_add_forms(xp, rng, layout):
    a, b = f32(rng, 3, 4), f32(rng, 3, 4)
    x, y = LAYOUTS[layout](a), LAYOUTS[layout](b)
    A, B = a.astype(np.float64), b.astype(np.float64)
    results = L("""function(x, y)
      local r = torch.CudaTensor()
      return x:clone():add(2), x:clone():add(y), x:clone():add(3, y), r:add(x, y), torch.add(x, 2),
             torch.add(x, y), torch.add(x, -2, y), x:clone():csub(1), x:clone():csub(2, y), x + y, x - y,
             x * 2, 3 - x, -x, x / 4, torch.CudaTensor():add(x, 0.5, y)
    end""")(x, y)
    refs = [A + 2, A + B, A + 3 * B, A + B, A + 2, A + B, A - 2 * B, A - 1, A - 2 * B, A + B, A - B, A * 2, 3 - A,
            -A, A / 4, A + 0.5 * B]
    for r, ref in zip(results, refs):
        close(r, ref)
    np.testing.assert_array_equal(host(x), a)  # inputs untouched


def test_binary_ops(xp, rng):
    a, b = f32(rng, 4, 3), f32(rng, 4, 3) + 3
    x, y = transposed(a), narrowed(b)
    A, B = a.astype(np.float64), b.astype(np.float64)
    pa = np.abs(A) + 0.5
    results = L("""function(x, y, p)
      return torch.cmul(x, y), torch.cdiv(x, y), x:clone():mul(3), x:clone():div(2), torch.cmax(x, y),
             torch.cmin(x, y), torch.cmax(x, 0.1), x:clone():cmin(0), torch.pow(p, 2.5), torch.pow(2, x),
             torch.cpow(p, y), torch.clamp(x, -0.5, 0.5), torch.addcmul(x, 2, x, y), x:clone():addcdiv(0.5, x, y),
             torch.lerp(x, y, 0.25), torch.atan2(x, y), torch.fmod(x, 0.3), torch.remainder(x, 0.3),
             torch.cfmod(x, y), torch.cremainder(x, y)
    end""")(x, y, dev(pa.astype(np.float32)))
    refs = [A * B, A / B, A * 3, A / 2, np.maximum(A, B), np.minimum(A, B), np.maximum(A, 0.1), np.minimum(A, 0),
            pa ** 2.5, 2 ** A, pa ** B, np.clip(A, -0.5, 0.5), A + 2 * A * B, A + 0.5 * A / B, A + 0.25 * (B - A),
            np.arctan2(A, B), np.fmod(A, np.float32(0.3)), np.remainder(A, np.float32(0.3)), np.fmod(A, B),
            np.remainder(A, B)]
    for r, ref in zip(results, refs):
        close(r, ref, rtol=1e-4, atol=1e-4)


@settings(max_examples=40, deadline=None)
@given(shape=st.lists(st.integers(0, 4), min_size=1, max_size=3), seed=st.integers(0, 2 ** 16),
       name=st.sampled_from(["add", "csub", "cmul", "cdiv", "cmax", "cmin"]), data=st.data())
def test_binary_random_views(shape, seed, name, data):
    """Elementwise ops on random shapes (zero sizes included) through permuted, strided views."""
    cuda.use_array_module(np)
    try:
        rng = np.random.default_rng(seed)
        perm = data.draw(st.permutations(range(len(shape))))
        a, b = (rng.standard_normal(shape) + 3).astype(np.float32), (rng.standard_normal(shape) + 3).astype(np.float32)
        # the view: a permuted, every-other-element window of a bigger device array
        big = np.zeros([2 * n for n in np.array(shape)[perm]], dtype=np.float32)
        window = big[tuple(slice(0, None, 2) for _ in shape)]
        window[...] = np.transpose(a, perm)
        x = L("function(t, ...) return t:permute(...) end")(cuda.from_device_array(window),
                                                             *[int(i) + 1 for i in np.argsort(perm)])
        r = L(f"function(x, y) return torch.{name}(x, y), x:clone():{name}(y) end")(x, dev(b))
        ref = {"add": a + b, "csub": a - b, "cmul": a * b, "cdiv": a / b, "cmax": np.maximum(a, b),
               "cmin": np.minimum(a, b)}[name].astype(np.float64)
        for t in r:
            close(t, ref)
    finally:
        cuda.use_array_module(None)


def test_apply_map_on_the_host(xp, rng):
    a, b = f32(rng, 2, 3), f32(rng, 2, 3)
    x = transposed(a)
    applied, mapped = L("""function(x, y)
      return x:clone():apply(function(v) return v * 2 end), x:clone():map(y, function(u, v) return u - v end)
    end""")(x, dev(b))
    close(applied, a * 2)
    close(mapped, a.astype(np.float64) - b)


def test_integer_semantics(xp):
    a = np.array([7, -7, 9, -9, 0, 5], dtype=np.int64)
    b = np.array([2, 2, -4, -4, 3, 5], dtype=np.int64)
    x, y = dev(a), dev(b)
    div, cdiv, mul, fmod, add = L("""function(x, y)
      return torch.div(x, 2), torch.cdiv(x, y), torch.mul(x, 2.9), torch.fmod(x, 4), torch.add(x, 2.7)
    end""")(x, y)
    np.testing.assert_array_equal(host(div), np.trunc(a / 2))         # C division truncates
    np.testing.assert_array_equal(host(cdiv), np.trunc(a / b))
    np.testing.assert_array_equal(host(mul), a * 2)                     # the value is cast first
    np.testing.assert_array_equal(host(fmod), np.fmod(a, 4))
    np.testing.assert_array_equal(host(add), a + 2)
    u = dev(np.array([250, 3], dtype=np.uint8))
    np.testing.assert_array_equal(host(L("function(u) return u:clone():add(10) end")(u)), [4, 13])


@pytest.mark.parametrize("name,op", [("lt", np.less), ("le", np.less_equal), ("gt", np.greater),
                                     ("ge", np.greater_equal), ("eq", np.equal), ("ne", np.not_equal)])
def test_comparisons(xp, rng, name, op):
    a = rng.integers(-2, 3, (3, 4)).astype(np.float32)
    b = rng.integers(-2, 3, (3, 4)).astype(np.float32)
    x, y = transposed(a), dev(b)
    by_tensor, by_value, method, into = L(f"""function(x, y)
      local r = torch.CudaTensor()
      return torch.{name}(x, y), torch.{name}(x, 0), x:{name}(y), r:{name}(x, y)
    end""")(x, y)
    for r, ref in [(by_tensor, op(a, b)), (by_value, op(a, 0)), (method, op(a, b)), (into, op(a, b))]:
        np.testing.assert_array_equal(host(r), ref.astype(np.uint8))
    assert L("function(r, q) return torch.type(r), torch.type(q) end")(by_tensor, into) == \
        ("torch.CudaByteTensor", "torch.CudaTensor")


POINTWISE_METHODS = ["fill", "zero", "copy", "exp", "sigmoid", "abs", "neg", "mul", "div", "fmod", "mod", "remainder",
                     "cmul", "cdiv", "cpow", "cmod", "cremainder", "atan2", "cmax", "cmin", "pow", "add", "csub",
                     "addcmul", "addcdiv", "clamp", "lerp", "lt", "ge", "ne", "lshift", "cbitand"]
# the same calls on either device: (Lua expression over x, y, p, numpy float64 reference)
POINTWISE_CALLS = [
    ("x:clone():fill(2.5)", lambda x, y, p: np.full_like(x, 2.5)),
    ("x:clone():zero()", lambda x, y, p: np.zeros_like(x)),
    ("torch.sigmoid(x)", lambda x, y, p: 1 / (1 + np.exp(-x))),
    ("torch.abs(x)", lambda x, y, p: np.abs(x)),
    ("torch.mul(x, 3)", lambda x, y, p: 3 * x),
    ("torch.pow(p, 3)", lambda x, y, p: p ** 3),
    ("torch.pow(2, x)", lambda x, y, p: 2 ** x),
    ("torch.cmax(x, y)", lambda x, y, p: np.maximum(x, y)),
    ("torch.cmin(x, 0)", lambda x, y, p: np.minimum(x, 0)),
    ("torch.add(x, -2, y)", lambda x, y, p: x - 2 * y),
    ("x:clone():csub(y)", lambda x, y, p: x - y),
    ("torch.addcdiv(x, 0.5, y, p)", lambda x, y, p: x + 0.5 * y / p),
    ("torch.clamp(x, -0.3, 0.4)", lambda x, y, p: np.clip(x, -0.3, 0.4)),
    ("torch.lerp(x, y, 0.75)", lambda x, y, p: x + 0.75 * (y - x)),
    ("torch.le(x, y)", lambda x, y, p: (x <= y).astype(np.uint8)),
    ("x:gt(0)", lambda x, y, p: (x > 0).astype(np.uint8)),
]


def test_pointwise_one_front_end(xp, rng):
    """CUDA tensors take the CPU methods (math/pointwise.lua, compare.lua, copy.lua): the same
    functions, results equal to the CPU's and to numpy, errors in the same words."""
    assert L("""function(names)
      local c, h = torch.CudaTensor(1), torch.FloatTensor(1)
      for n in names:gmatch('%S+') do if c[n] ~= h[n] then return n end end
      return true
    end""")(" ".join(POINTWISE_METHODS)) is True
    a, b = f32(rng, 3, 4), f32(rng, 3, 4)
    pa = (np.abs(a) + 0.5).astype(np.float32)
    run = L("function(x, y, p) return " + ", ".join(expr for expr, _ in POINTWISE_CALLS) + " end")
    on_device = run(transposed(a), narrowed(b), dev(pa))
    on_host = run(*(luabridge.from_numpy(v) for v in (a, b, pa)))
    A, B, PA = (v.astype(np.float64) for v in (a, b, pa))
    for (expr, ref), d, h in zip(POINTWISE_CALLS, on_device, on_host):
        np.testing.assert_allclose(host(d), luabridge.to_numpy(h), rtol=1e-6, atol=1e-6, err_msg=expr)
        np.testing.assert_allclose(host(d), ref(A, B, PA), rtol=1e-5, atol=1e-5, err_msg=expr)
    assert_lua_errors([
        ("function() return torch.lt(torch.CudaLongTensor(), torch.CudaTensor(2), 0) end",
         "lt: the result must be a torch.CudaByteTensor or a torch.CudaTensor, got torch.CudaLongTensor"),
        ("function() return torch.CudaTensor(2):clamp(0) end",
         r"clamp: invalid arguments \(torch.CudaTensor, number\); expected \[res,\] tensor, min_value, max_value"),
        ("function() return torch.CudaByteTensor(2):lerp(torch.CudaByteTensor(2), 0.5) end",
         "lerp: torch.CudaByteTensor is not supported; torch7 has lerp for torch.CudaTensor, "
         "torch.CudaDoubleTensor and torch.CudaHalfTensor only"),
        ("function() return torch.CudaTensor(2):copy(torch.FloatTensor(3)) end",
         r"copy: inconsistent tensor size, 2 \(2 elements\) and 3 \(3 elements\)"),
        ("function() return torch.CudaTensor(2):bitand(1) end",
         "bitand: torch.CudaTensor is not supported; torch7 has bitand for the integer types only "
         r"\(CudaByte, CudaChar, CudaShort, CudaInt and CudaLong\)"),
        ("function() return torch.cbitor(torch.CudaIntTensor(2), torch.CudaLongTensor(2)) end",
         "cbitor: expected torch.CudaIntTensor, got torch.CudaLongTensor"),
    ])
    shifted = L("function() return torch.CudaTensor({1, 3}):lshift(2), torch.CudaDoubleTensor({8, 2}):rshift(1) end")()
    np.testing.assert_array_equal(host(shifted[0]), [4, 12])   # Float and Double shifts scale by 2^v
    np.testing.assert_array_equal(host(shifted[1]), [4, 1])


# ----------------------------------------------------------------------------------------------
# reductions

@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_reductions(xp, rng, layout):
    a = f32(rng, 4, 5)
    A = a.astype(np.float64)
    t = LAYOUTS[layout](a)
    alls = L("""function(t)
      return t:sum(), t:mean(), t:prod(), t:max(), t:min(), t:var(), t:std(), t:var(true), t:norm(),
             t:norm(1), t:norm(3), t:norm(0), torch.sum(t)
    end""")(t)
    refs = [A.sum(), A.mean(), A.prod(), A.max(), A.min(), A.var(ddof=1), A.std(ddof=1), A.var(),
            np.sqrt((A ** 2).sum()), np.abs(A).sum(), (np.abs(A) ** 3).sum() ** (1 / 3), np.count_nonzero(A), A.sum()]
    assert alls == pytest.approx(refs, rel=1e-5, abs=1e-6)
    for d in (1, 2):
        ax = d - 1
        dims = L(f"""function(t)
          local r = torch.CudaTensor()
          torch.sum(r, t, {d})
          return t:sum({d}), t:mean({d}), t:prod({d}), t:var({d}), t:std({d}, true), t:norm(3, {d}), r,
                 t:cumsum({d}), t:cumprod({d})
        end""")(t)
        refs = [A.sum(ax, keepdims=True), A.mean(ax, keepdims=True), A.prod(ax, keepdims=True),
                A.var(ax, ddof=1, keepdims=True), A.std(ax, keepdims=True),
                (np.abs(A) ** 3).sum(ax, keepdims=True) ** (1 / 3), A.sum(ax, keepdims=True), A.cumsum(ax), A.cumprod(ax)]
        for r, ref in zip(dims, refs):
            close(r, ref, rtol=1e-4, atol=1e-5)
        vals, idx, mvals, midx = L(f"function(t) local v, i = t:max({d}); local w, j = torch.min(t, {d}); return v, i, w, j end")(t)
        close(vals, A.max(ax, keepdims=True))
        np.testing.assert_array_equal(host(idx), A.argmax(ax).reshape(host(vals).shape) + 1)
        close(mvals, A.min(ax, keepdims=True))
        np.testing.assert_array_equal(host(midx), A.argmin(ax).reshape(host(mvals).shape) + 1)
        assert L("function(i) return torch.type(i) end")(idx) == "torch.CudaLongTensor"


def test_dot_dist_trace_equal_all_any(xp, rng):
    a, b = f32(rng, 3, 4), f32(rng, 3, 4)
    A, B = a.astype(np.float64), b.astype(np.float64)
    x, y = transposed(a), dev(b)
    r = L("function(x, y) return x:dot(y), torch.dot(x, y), x:dist(y), torch.dist(x, y, 1), x:trace() end")(x, y)
    assert r == pytest.approx([(A * B).sum(), (A * B).sum(), np.sqrt(((A - B) ** 2).sum()), np.abs(A - B).sum(),
                               np.trace(A)], rel=1e-5)
    assert L("function(x, y) return x:equal(x:clone()), x:equal(y), x:equal(x:contiguous():view(12)) end")(x, y) == (True, False, False)
    m = dev(np.array([1, 0, 1], dtype=np.uint8))
    assert L("function(m) return m:all(), m:any(), m:clone():fill(1):all() end")(m) == (False, True, True)


# ----------------------------------------------------------------------------------------------
# matrix products

def test_matrix_products(xp, rng):
    m, k, n, nb = 3, 4, 5, 2
    a, b, c = f32(rng, m, k), f32(rng, k, n), f32(rng, m, n)
    v, w = f32(rng, k), f32(rng, m)
    ba, bb, bc = f32(rng, nb, m, k), f32(rng, nb, k, n), f32(rng, nb, m, n)
    A, B, C, V, W = (x.astype(np.float64) for x in (a, b, c, v, w))
    BA, BB, BC = (x.astype(np.float64) for x in (ba, bb, bc))
    T = [transposed(a), narrowed(b), dev(c), dev(v), dev(w), dev(ba), dev(bb), dev(bc)]
    results = L("""function(a, b, c, v, w, ba, bb, bc)
      return torch.mm(a, b), torch.addmm(c, a, b), torch.addmm(0.5, c, 2, a, b), c:clone():addmm(a, b),
             c:clone():addmm(3, a, b), c:clone():addmm(0.5, 2, a, b), torch.CudaTensor():addmm(c, a, b),
             torch.mv(a, v), torch.addmv(w, a, v), w:clone():addmv(2, a, v), torch.ger(w, w),
             torch.addr(c:narrow(2, 1, 3), w, w), torch.bmm(ba, bb), torch.baddbmm(bc, ba, bb),
             torch.addbmm(c, ba, bb), a * b, a * v, v * v
    end""")(*T)
    refs = [A @ B, C + A @ B, 0.5 * C + 2 * A @ B, C + A @ B, C + 3 * A @ B, 0.5 * C + 2 * A @ B, C + A @ B,
            A @ V, W + A @ V, W + 2 * A @ V, np.outer(W, W), C[:, :3] + np.outer(W, W), BA @ BB, BC + BA @ BB,
            C + (BA @ BB).sum(0), A @ B, A @ V, V @ V]
    for r, ref in zip(results, refs):
        if isinstance(r, float):
            assert r == pytest.approx(ref, rel=1e-5)
        else:
            close(r, ref, rtol=1e-4, atol=1e-4)
    # the result may be a factor: resizing it must not change what is multiplied
    square = L("function(a, b) local x = a:clone(); x:mm(x, b); return x end")(dev(a), dev(b))
    close(square, A @ B, rtol=1e-4, atol=1e-4)


def test_matrix_product_errors(xp, rng):
    a, b = dev(f32(rng, 2, 3)), dev(f32(rng, 4, 5))
    assert_lua_errors([
        ("function(a, b) return torch.mm(a, b) end", r"mm: size mismatch, 2x3 and 4x5"),
        ("function(a) return torch.addmm(a, a, a:t()) end", r"addmm: size mismatch, t: 2x3"),
        ("function(a) return torch.mv(a, a) end", r"mv: expected 2D and 1D tensors, got 2D, 2D"),
    ], a, b)   # Lua drops the arguments a function does not take


def test_gemm_op_on_both_devices(xp, rng):
    """The op table's gemm, as nn calls it, in every form: the CUDA marshaller and the CPU op give
    numpy's results."""
    a, b, m, x, y = f32(rng, 4, 3), f32(rng, 3, 5), f32(rng, 4, 5), f32(rng, 3), f32(rng, 4)
    ba, bb = f32(rng, 2, 4, 3), f32(rng, 2, 3, 5)
    A, B, M, X, Y, BA, BB = (v.astype(np.float64) for v in (a, b, m, x, y, ba, bb))
    cases = [  # (r's shape, beta, m, a, b, batchSum, reference)
        ((4, 5), 2, m, a, b, False, 2 * M + 3 * A @ B),
        ((4,), 2, y, a, x, False, 2 * Y + 3 * A @ X),
        ((4, 3), 0, None, y, x, False, 3 * np.outer(Y, X)),
        ((2, 4, 5), 0, None, a, bb, False, 3 * A @ BB),
        ((2, 4, 5), 0, None, ba, bb, False, 3 * BA @ BB),
        ((4, 5), 2, m, ba, bb, True, 2 * M + 3 * (BA @ BB).sum(0)),
    ]
    gemm = L("""function(r, beta, m, a, b, batchSum)
      require('torch.backend').of(r).gemm(r, beta, m or r, 3, a, b, batchSum)
      return r
    end""")
    for shape, beta, mv, av, bv, batch_sum, ref in cases:
        r = np.zeros(shape, np.float32)
        on_cpu = gemm(luabridge.from_numpy(r), beta, mv, av, bv, batch_sum)
        on_device = gemm(dev(r), beta, mv if mv is None else dev(mv), dev(av), dev(bv), batch_sum)
        np.testing.assert_allclose(luabridge.to_numpy(on_cpu), ref, rtol=1e-4, atol=1e-4)
        close(on_device, ref, rtol=1e-4, atol=1e-4)


# ----------------------------------------------------------------------------------------------
# indexing

def test_index_ops(xp, rng):
    a = f32(rng, 4, 5)
    A = a.astype(np.float64)
    idx = np.array([3, 1, 3], dtype=np.int64)
    t = transposed(a)
    sel_cpu_idx, sel_dev_idx, into, rows = L("""function(t, i)
      local r = torch.CudaTensor()
      r:index(t, 2, i)
      return t:index(2, i), t:index(2, i:cudaLong()), r, t[i:cudaLong()]
    end""")(t, luabridge.from_numpy(idx))
    for r in (sel_cpu_idx, sel_dev_idx, into):
        close(r, A[:, idx - 1])
    close(rows, A[idx - 1])
    src = f32(rng, 4, 2)
    copied, filled, added = L("""function(t, src)
      local i = torch.LongTensor({4, 2})
      return t:clone():indexCopy(2, i, src), t:clone():indexFill(1, i, -1), t:clone():indexAdd(2, torch.LongTensor({1, 1}), src)
    end""")(t, dev(src))
    ref = A.copy(); ref[:, [3, 1]] = src
    close(copied, ref)
    ref = A.copy(); ref[[3, 1]] = -1
    close(filled, ref)
    ref = A.copy(); ref[:, 0] += src[:, 0] + src[:, 1]
    close(added, ref)


def test_gather_scatter(xp, rng):
    a = f32(rng, 3, 4)
    A = a.astype(np.float64)
    gi = rng.integers(1, 4, (2, 4)).astype(np.int64)   # indices along dim 1
    t = transposed(a)
    g = L("function(t, i) return t:gather(1, i:cudaLong()) end")(t, luabridge.from_numpy(gi))
    close(g, np.take_along_axis(A, gi - 1, axis=0))
    si = np.array([[2, 0, 1, 3], [1, 3, 0, 2]], dtype=np.int64) + 1   # a permutation per row: no collisions
    src = f32(rng, 2, 5)
    scattered, filled = L("""function(t, i, src)
      return t:narrow(1, 1, 2):clone():scatter(2, i, src), t:narrow(1, 1, 2):clone():scatter(2, i, 7)
    end""")(t, luabridge.from_numpy(si), dev(src))
    ref = A[:2].copy()
    np.put_along_axis(ref, si - 1, src[:, :4], axis=1)
    close(scattered, ref)
    ref = A[:2].copy()
    np.put_along_axis(ref, si - 1, 7, axis=1)
    close(filled, ref)


def test_masked_ops_and_nonzero(xp, rng):
    a = f32(rng, 3, 4)
    A = a.astype(np.float64)
    mask = (a > 0).astype(np.uint8)
    t = transposed(a)
    sel, sel_dev, filled, copied, by_index, nz = L("""function(t, m)
      local dm = m:cudaByte()
      local c = t:clone()
      c[dm] = 5
      local src = torch.CudaTensor(12):fill(-2)
      return t:maskedSelect(m), torch.maskedSelect(t, dm), t:clone():maskedFill(dm, 0), t:clone():maskedCopy(m, src),
             t[dm], torch.nonzero(dm)
    end""")(t, luabridge.from_numpy(mask))
    for r in (sel, sel_dev, by_index):
        close(r, A[mask != 0])
    close(filled, np.where(mask, 0, A))
    close(copied, np.where(mask, -2, A))
    np.testing.assert_array_equal(host(nz), np.argwhere(mask) + 1)


def test_index_errors(xp, rng):
    t = dev(f32(rng, 3, 4))
    assert_lua_errors([
        ("function(t) return t:index(2, torch.LongTensor({1, 5})) end",
         r"index: index 5 out of range for dimension 2 of size 4"),
        ("function(t) return t:indexFill(1, torch.CudaLongTensor({0, 2}), 1) end",
         r"indexFill: index 0 out of range for dimension 1 of size 3"),
        ("function(t) return t:index(2, torch.CudaTensor({1})) end",
         "the index must be a torch.LongTensor or torch.CudaLongTensor"),
        ("function(t) return t:gather(1, torch.LongTensor(2, 2):fill(1)) end",
         "gather: the index \\(2x2\\) must match 3x4 in every dimension but 1"),
        ("function(t) return t:indexCopy(1, torch.LongTensor({1, 2}), torch.CudaTensor(3, 4)) end",
         "indexCopy: 2 indices but the source has size 3 in dimension 1"),
        ("function(t) return t:maskedFill(torch.ByteTensor(5):zero(), 1) end",
         r"maskedFill: inconsistent tensor size, 3x4 \(12 elements\) and 5"),
        ("function(t) return t:maskedCopy(torch.ByteTensor(3, 4):fill(1), torch.CudaTensor(2)) end",
         "maskedCopy: the mask has 12 ones but the source only 2 elements"),
    ], t)


# Every indexing op of math/index.lua on a tensor t with an index i and a 0/1 mask m of t's
# device (t 3x4); the results in order.
INDEX_OPS = """function(t, i, m)
  local src, r = t:index(2, i), t.new()
  return t:index(1, i), r:index(t, 2, i), t:clone():indexCopy(2, i, src), t:clone():indexAdd(2, i, src),
         t:clone():indexFill(2, i, -1), torch.gather(t, 2, i:view(1, 3):expand(3, 3)),
         t:clone():scatter(1, i:narrow(1, 2, 2):view(2, 1):expand(2, 4), -5), t:maskedSelect(m),
         t:clone():maskedFill(m, 9), t:clone():maskedCopy(m, t:index(1, i)), t[m], torch.nonzero(m)
end"""


def index_refs(a: np.ndarray, idx: np.ndarray, mask: np.ndarray) -> list[np.ndarray]:
    """numpy's results of INDEX_OPS (float64; idx 1-based; idx[1:] distinct)."""
    i = idx - 1
    src = a[:, i]
    copied = a.copy(); copied[:, i] = src
    added = a.copy(); np.add.at(added, (slice(None), i), src)
    filled = a.copy(); filled[:, i] = -1
    scattered = a.copy(); scattered[i[1:]] = -5
    sel = a[mask == 1]
    copy = a.copy(); copy[mask == 1] = a[i].ravel()[: sel.size]
    return [a[i], src, copied, added, filled, a[:, i], scattered, sel, np.where(mask, 9, a), copy, sel,
            np.argwhere(mask) + 1]


def test_index_ops_one_front_end(xp, rng):
    """CPU and CUDA tensors take the same front end: each gives numpy's results."""
    a = f32(rng, 3, 4)
    idx = np.array([2, 3, 1], dtype=np.int64)
    mask = (a > 0).astype(np.uint8)
    ops = L(INDEX_OPS)
    cpu = ops(luabridge.from_numpy(a), luabridge.from_numpy(idx), luabridge.from_numpy(mask))
    cuda_ = ops(transposed(a), dev(idx), dev(mask))
    for k, (c, g, ref) in enumerate(zip(cpu, cuda_, index_refs(a.astype(np.float64), idx, mask))):
        np.testing.assert_allclose(luabridge.to_numpy(c), ref, rtol=2e-6, err_msg=f"CPU result {k + 1}")
        close(g, ref)


def test_index_errors_read_alike_on_both_devices(xp, rng):
    """The one front end's checks: the same message for a CPU and a CUDA tensor, before anything
    is written; a CPU tensor takes no device index or mask."""
    a = f32(rng, 3, 4)
    cases = [
        ("function(t, i, m) return t:index(2, i:fill(5)) end", "index: index 5 out of range for dimension 2 of size 4"),
        ("function(t, i, m) return t:indexFill(1, i:fill(0), 1) end", "indexFill: index 0 out of range for dimension 1 of size 3"),
        ("function(t, i, m) return t:scatter(2, i:fill(5):view(3, 1), 0) end", "scatter: index 5 out of range for dimension 2 of size 4"),
        ("function(t, i, m) return t:gather(1, i) end", "gather: the index must have 2 dimensions, got 3"),
        ("function(t, i, m) return t:maskedFill(m:fill(2), 1) end", "maskedFill: the mask can hold 0 and 1 only"),
        ("function(t, i, m) return t:maskedCopy(m:fill(1), t:view(12):narrow(1, 1, 2)) end",
         "maskedCopy: the mask has 12 ones but the source only 2 elements"),
        ("function(t, i, m) return t:indexAdd(1, i, t:narrow(2, 1, 3)) end",
         r"indexAdd: slices of the destination \(3x4\) and the source \(3x3\) along dimension 1 differ in size"),
    ]
    for code, pattern in cases:
        fn = L(code)
        for t, i, m in ((luabridge.from_numpy(a.copy()), luabridge.from_numpy(np.array([1, 2, 3])),
                         luabridge.from_numpy(np.zeros((3, 4), np.uint8))),
                        (dev(a), dev(np.array([1, 2, 3])), dev(np.zeros((3, 4), np.uint8)))):
            with pytest.raises(luabridge.LuaError, match=pattern):
                fn(t, i, m)
            np.testing.assert_array_equal(host(t), a)
    assert_lua_errors([
        ("function(t) return t:index(1, torch.CudaLongTensor({1})) end",
         "index: the index must be a torch.LongTensor, got torch.CudaLongTensor"),
        ("function(t) return t:maskedSelect(torch.CudaByteTensor(3, 4):zero()) end",
         "maskedSelect: the mask must be a torch.ByteTensor, got torch.CudaByteTensor"),
        ("function(t) return torch.nonzero(torch.LongTensor(), t:cuda()) end",
         "nonzero: the index result must be a torch.CudaLongTensor, got torch.LongTensor"),
    ], luabridge.from_numpy(a))


def test_cpu_only_families_name_the_missing_op(xp, rng):
    """LAPACK, torch.conv2 and the like, cross: checked by the one front end, then the CUDA op
    table names the op it lacks; the constructors made of fills and copies serve CUDA tensors."""
    x = dev(f32(rng, 3, 3))
    assert_lua_errors([
        ("function(x) return torch.gesv(x, x) end", "gesv is not available for CUDA tensors"),
        ("function(x) return torch.inverse(x) end", "inverse is not available for CUDA tensors"),
        ("function(x) return torch.svd(x) end", "svd is not available for CUDA tensors"),
        ("function(x) return torch.inverse(x:narrow(1, 1, 2)) end", "inverse: A should be square, but is 2x3"),
        ("function(x) return torch.conv2(x, x:narrow(1, 1, 2)) end", "xcorr3 is not available for CUDA tensors"),
        ("function(x) return torch.xcorr2(x, x:view(9)) end", "xcorr2: expected 2D input and 2D kernel"),
        ("function(x) return torch.cross(x, x) end", "cross is not available for CUDA tensors"),
    ], x)
    eye, seq = L("function(x) return torch.eye(x.new(), 3), torch.linspace(x.new(), 0, 1, 5) end")(x)
    close(eye, np.eye(3))
    close(seq, np.linspace(0, 1, 5))


# ----------------------------------------------------------------------------------------------
# sorting and joining

def test_sort_topk_kthvalue_median(xp, rng):
    a = rng.permutation(20).reshape(4, 5).astype(np.float32)   # distinct values: indices are defined
    A = a.astype(np.float64)
    t = transposed(a)
    sv, si, dv, di, s1, i1 = L("""function(t)
      local sv, si = t:sort()
      local dv, di = torch.sort(t, 2, true)
      local s1, i1 = t:sort(1)
      return sv, si, dv, di, s1, i1
    end""")(t)
    close(sv, np.sort(A, 1))
    np.testing.assert_array_equal(host(si), np.argsort(A, 1) + 1)
    close(dv, -np.sort(-A, 1))
    np.testing.assert_array_equal(host(di), np.argsort(-A, 1) + 1)
    close(s1, np.sort(A, 0))
    np.testing.assert_array_equal(host(i1), np.argsort(A, 0) + 1)
    kv, ki, lv, li, mv, mi, medv, medi = L("""function(t)
      local kv, ki = t:topk(2)
      local lv, li = t:topk(3, 1, true)
      local mv, mi = t:kthvalue(2)
      local medv, medi = t:median()
      return kv, ki, lv, li, mv, mi, medv, medi
    end""")(t)
    close(kv, np.sort(A, 1)[:, :2])
    np.testing.assert_array_equal(host(ki), np.argsort(A, 1)[:, :2] + 1)
    close(lv, -np.sort(-A, 0)[:3])
    np.testing.assert_array_equal(host(li), np.argsort(-A, 0)[:3] + 1)
    close(mv, np.sort(A, 1)[:, 1:2])
    np.testing.assert_array_equal(host(mi), np.argsort(A, 1)[:, 1:2] + 1)
    close(medv, np.sort(A, 1)[:, 2:3])
    np.testing.assert_array_equal(host(medi), np.argsort(A, 1)[:, 2:3] + 1)


REDUCE_SORT_METHODS = ("sum prod mean var std norm all any max min cumsum cumprod dist renorm equal trace "
                       "sort topk kthvalue median mode").split()


@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_reduce_and_sort_one_front_end(xp, rng, layout):
    """The CUDA types' reduction and sort methods are math/reduce.lua's and math/sort.lua's; the
    same calls on a CUDA tensor and on its CPU copy agree with numpy."""
    same = L("""function(names)
      local c, h = torch.CudaTensor(1), torch.FloatTensor(1)
      for _, n in ipairs(names) do if c[n] ~= h[n] then return n end end
      return true
    end""")(luabridge.eval("{" + ",".join(f"'{n}'" for n in REDUCE_SORT_METHODS) + "}"))
    assert same is True
    a = rng.permutation(24).reshape(4, 6).astype(np.float32) / 4 - 3   # distinct: positions are defined
    A = a.astype(np.float64)
    calls = L("""function(x)
      local y = x:clone():fill(0.5)
      local mv, mi = x:max(1)
      local tv, ti = x:topk(2, 2, true)
      local kv, ki = torch.kthvalue(x, 3, 1)
      local sv, si = x:sort(1, true)
      local medv, medi = torch.median(x, 2)
      return x:sum(), x:mean(), x:var(true), x:std(), x:norm(3), x:min(), x:trace(), x:dist(y, 3),
             x:equal(x:clone()), x:sum(1), x:prod(2), x:var(1, true), x:std(2), x:norm(1, 2), x:cumsum(2),
             x:clone():renorm(2, 1, 3), mv, mi, tv, ti, kv, ki, sv, si, medv, medi
    end""")
    on_device, on_host = calls(LAYOUTS[layout](a)), calls(luabridge.from_numpy(a))
    order = np.argsort(-A, 0)
    row_norms = np.sqrt((A ** 2).sum(1, keepdims=True))
    refs = [A.sum(), A.mean(), A.var(), A.std(ddof=1), (np.abs(A) ** 3).sum() ** (1 / 3), A.min(), np.trace(A),
            (np.abs(A - 0.5) ** 3).sum() ** (1 / 3), True, A.sum(0, keepdims=True), A.prod(1, keepdims=True),
            A.var(0, keepdims=True), A.std(1, ddof=1, keepdims=True), np.abs(A).sum(1, keepdims=True),
            A.cumsum(1), np.where(row_norms > 3, A * 3 / (row_norms + 1e-7), A),
            A.max(0, keepdims=True), A.argmax(0)[None] + 1, -np.sort(-A, 1)[:, :2], np.argsort(-A, 1)[:, :2] + 1,
            np.sort(A, 0)[2:3], np.argsort(A, 0)[2:3] + 1, np.take_along_axis(A, order, 0), order + 1,
            np.sort(A, 1)[:, 2:3], np.argsort(A, 1)[:, 2:3] + 1]
    assert len(on_device) == len(on_host) == len(refs)
    for got_device, got_host, ref in zip(on_device, on_host, refs):
        for got in (got_device, got_host):
            if isinstance(ref, np.ndarray):
                np.testing.assert_allclose(host(got), ref, rtol=1e-5, atol=1e-5)
            else:
                assert got == pytest.approx(ref, rel=1e-5)
    assert L("function(i) return torch.type(i) end")(on_device[17]) == "torch.CudaLongTensor"


def test_reduce_and_sort_errors_take_the_cpu_wording(xp, rng):
    x = dev(f32(rng, 2, 3))
    assert_lua_errors([
        ("function(x) return torch.max(x.new(), torch.LongTensor(), x, 1) end",
         "max: the index result must be a torch.CudaLongTensor, got torch.LongTensor"),
        ("function(x) return torch.sort(x.new(), torch.CudaTensor(), x) end",
         "sort: the index result must be a torch.CudaLongTensor, got torch.CudaTensor"),
        ("function() return torch.CudaLongTensor(2):mean() end",
         "mean: expected a torch.CudaTensor, torch.CudaDoubleTensor or torch.CudaHalfTensor, got torch.CudaLongTensor"),
        ("function(x) return x:all() end", "all: expected a torch.CudaByteTensor, got torch.CudaTensor"),
        ("function(x) return torch.sum(x.new(), x) end", "sum: a result tensor was given but no dimension to reduce"),
        ("function(x) return x:max(3) end", "max: dimension 3 out of range of 2D tensor"),
        ("function(x) return x:view(6):trace() end", "trace: expected a 2D tensor, got 1D"),
        ("function(x) return x:renorm(0, 1, 1) end", "renorm: the norm must be positive, got p = 0"),
        ("function(x) return x:kthvalue(0) end", "kthvalue: k = 0 out of range for dimension 2 of size 3"),
        ("function() return torch.CudaTensor(2, 0):mode() end", "mode: dimension 2 has size 0"),
    ], x)


def test_cat(xp, rng):
    a, b, c = f32(rng, 2, 3), f32(rng, 2, 3), f32(rng, 4, 3)
    r1, r2, r3, r4 = L("""function(a, b, c)
      local r = torch.CudaTensor()
      torch.cat(r, a, c, 1)
      return torch.cat(a, b), torch.cat({a, b, a}, 1), r, torch.cat({a:contiguous():view(6), b:view(6)})
    end""")(transposed(a), dev(b), dev(c))
    close(r1, np.concatenate([a, b], 1))
    close(r2, np.concatenate([a, b, a], 0))
    close(r3, np.concatenate([a, c], 0))
    close(r4, np.concatenate([a.ravel(), b.ravel()]))
    with pytest.raises(luabridge.LuaError, match="cat: inconsistent tensor sizes 2x3 and 4x3 in dimension 1"):
        L("function(a, c) return torch.cat(a, c, 2) end")(dev(a), dev(c))
    parts = L("function(c) local s = c:split(3); local k = torch.chunk(c, 2, 2); return s[1], s[2], k[2] end")(dev(c))
    for part, ref in zip(parts, [c[:3], c[3:], c[:, 2:]]):
        assert L("function(p) return torch.type(p) end")(part) == "torch.CudaTensor"
        close(part, ref)


# ----------------------------------------------------------------------------------------------
# random numbers

def test_random(xp):
    n = 20000
    u, g, b, p, r, e = L("""function(n)
      torch.cudaManualSeed(7)
      return torch.CudaTensor(n):uniform(2, 5), torch.CudaDoubleTensor(n):normal(1, 3),
             torch.CudaTensor(n):bernoulli(0.3), torch.CudaTensor(n):bernoulli(torch.CudaTensor(n):fill(1)),
             torch.CudaLongTensor(n):random(3, 6), torch.CudaTensor(n):exponential(2)
    end""")(n)
    u, g, b, p, r, e = map(host, (u, g, b, p, r, e))
    assert u.min() >= 2 and u.max() <= 5 and abs(u.mean() - 3.5) < 0.05
    assert abs(g.mean() - 1) < 0.1 and abs(g.std() - 3) < 0.1
    assert set(np.unique(b)) == {0, 1} and abs(b.mean() - 0.3) < 0.02
    assert (p == 1).all()
    assert set(np.unique(r)) == {3, 4, 5, 6}
    assert e.min() >= 0 and abs(e.mean() - 0.5) < 0.02
    again = L("function(n) torch.cudaManualSeed(7); return torch.CudaTensor(n):uniform(2, 5) end")(n)
    np.testing.assert_array_equal(host(again), u)


def test_random_one_front_end(xp):
    """The CUDA types' random methods are random.lua's: its bounds, defaults and checks."""
    same = L("""function()
      local c, h = torch.CudaTensor(1), torch.FloatTensor(1)
      for _, n in ipairs({'uniform', 'normal', 'cauchy', 'logNormal', 'exponential', 'geometric',
                          'bernoulli', 'random'}) do
        if c[n] ~= h[n] then return n end
      end
      return true
    end""")()
    assert same is True
    n = 20000
    whole_long, whole_float, upto, probs, rand = map(host, L("""function(n)
      torch.cudaManualSeed(3)
      local p = torch.FloatTensor(n):zero()
      p:narrow(1, 1, n / 2):fill(1)
      return torch.CudaLongTensor(n):random(), torch.CudaTensor(n):random(), torch.CudaIntTensor(n):random(4),
             torch.CudaTensor(n):bernoulli(p), torch.rand(torch.CudaDoubleTensor(), 4, n / 4)
    end""")(n))
    # random(): a 32-bit draw reduced to the type's range, as on the CPU; random(b): 1..b
    assert whole_long.min() >= 0 and whole_long.max() < 2 ** 32 and whole_long.max() > 2 ** 31
    assert whole_float.min() >= 0 and whole_float.max() <= 2 ** 24 and whole_float.max() > 2 ** 23
    assert set(np.unique(upto)) == {1, 2, 3, 4}
    np.testing.assert_array_equal(probs, np.repeat([1, 0], n // 2))   # host probabilities
    assert rand.shape == (4, n // 4) and rand.min() >= 0 and rand.max() < 1 and abs(rand.mean() - 0.5) < 0.02
    assert_lua_errors([
        ("function() return torch.CudaTensor(3):normal(0, 0) end",
         "normal: standard deviation must be strictly positive, got 0"),
        ("function() return torch.CudaTensor(3):geometric(1) end", "geometric: p must be > 0 and < 1, got 1"),
        ("function() return torch.CudaTensor(2):bernoulli(torch.CudaTensor(2):fill(2)) end",
         "bernoulli: p must be >= 0 and <= 1, got 2"),
        ("function() return torch.CudaLongTensor(2):uniform() end",
         "uniform: expected a floating-point tensor .* got torch.CudaLongTensor"),
        ("function() return torch.CudaTensor(2):random(5, 1) end",
         r"random: upper bound must be larger than lower bound, got \[5, 1\]"),
        ("function() return torch.CudaTensor(2):uniform(torch.Generator()) end",
         "uniform: CUDA tensors draw from the device generator"),
        ("function() return torch.cudaManualSeed('x') end", "cudaManualSeed: seed must be a number"),
    ])


# ----------------------------------------------------------------------------------------------
# bitwise ops and shifts, clamp with min > max, mode and histc: the CPU's results on the device

CUDA_NAME = {np.uint8: "Byte", np.int8: "Char", np.int16: "Short", np.int32: "Int", np.int64: "Long",
             np.float32: "", np.float64: "Double", np.float16: "Half"}


def cuda_type(dtype: type) -> str:
    return f"torch.Cuda{CUDA_NAME[dtype]}Tensor"


def strided(a: np.ndarray):
    """A transposed (non-contiguous) CUDA view of a's type with a's values."""
    return L("function(t) return t:t() end")(dev(np.ascontiguousarray(a.T), cuda_type(a.dtype.type)))


def on_both_devices(code: str, *arrays: np.ndarray) -> tuple[list, list]:
    """The values returned by the Lua function `code` of CPU tensors of the arrays, then of strided
    CUDA views of them (as numpy arrays)."""
    fn = L(code)
    on_host = fn(*(luabridge.from_numpy(np.ascontiguousarray(a)) for a in arrays))
    on_device = fn(*(strided(a) for a in arrays))
    return [host(t) for t in on_host], [host(t) for t in on_device]


def wrapped(v: int, dtype: type) -> int:
    """The Python int v as an element of the integer type dtype holds it (C's wrap-around)."""
    info = np.iinfo(dtype)
    v %= 1 << info.bits
    return v - (1 << info.bits) if info.min < 0 and v > info.max else v


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int16, np.int32, np.int64])
def test_shifts_and_bitwise_ops_of_integer_types(xp, rng, dtype):
    """lshift ... cbitxor of CUDA integer tensors equal the CPU's and a Python-int reference:
    numbers are cast to the element type, a shift moves the bits of the unsigned value by the
    count modulo 32, or 64 for Long (LuaJIT's bit ops, which are the CPU's loops; negative counts
    included), and its result wraps into the type."""
    info = np.iinfo(dtype)
    lanes, mask = (64 if info.bits == 64 else 32), (1 << info.bits) - 1
    edges = [info.min, info.max, 0, 1, info.max // 3, info.min // 5]
    x = np.array(edges + [int(v) for v in rng.integers(info.min, info.max, 18, endpoint=True)], dtype=dtype)
    counts = [-70, -33, -9, -1, 0, 1, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 40, 63, 64, 65, 100, 2, 5, 6]
    y = np.array([wrapped(c, dtype) for c in counts], dtype=dtype)
    x, y = x.reshape(4, 6), y.reshape(4, 6)

    def lshift(a: int, c: int) -> int:
        return wrapped(a << (wrapped(c, dtype) % lanes), dtype)

    def rshift(a: int, c: int) -> int:
        return wrapped((a & mask) >> (wrapped(c, dtype) % lanes), dtype)

    calls = [   # (Lua expression over x and y, the reference of elements a of x and b of y)
        ("torch.lshift(x, 5)", lambda a, b: lshift(a, 5)),
        ("torch.lshift(x, -3)", lambda a, b: lshift(a, -3)),
        ("x:clone():lshift(70)", lambda a, b: lshift(a, 70)),
        ("torch.rshift(x, 3)", lambda a, b: rshift(a, 3)),
        ("torch.rshift(x, 33)", lambda a, b: rshift(a, 33)),
        ("torch.rshift(x, -1)", lambda a, b: rshift(a, -1)),
        ("torch.clshift(x, y)", lshift),
        ("x:clone():crshift(y)", rshift),
        ("x:clone():bitand(77)", lambda a, b: wrapped(a & wrapped(77, dtype), dtype)),
        ("torch.bitor(x, -77)", lambda a, b: wrapped(a | wrapped(-77, dtype), dtype)),
        ("torch.bitxor(x, 1234)", lambda a, b: wrapped(a ^ wrapped(1234, dtype), dtype)),
        ("torch.cbitand(x, y)", lambda a, b: a & b),
        ("torch.cbitor(x, y)", lambda a, b: a | b),
        ("x:clone():cbitxor(y)", lambda a, b: a ^ b),
    ]
    on_host, on_device = on_both_devices("function(x, y) return " + ", ".join(e for e, _ in calls) + " end", x, y)
    pairs = list(zip(x.ravel().tolist(), y.ravel().tolist()))
    for (expr, ref), h, d in zip(calls, on_host, on_device):
        want = np.array([ref(a, b) for a, b in pairs], dtype=dtype).reshape(x.shape)
        assert d.dtype == dtype, expr
        np.testing.assert_array_equal(d, h, err_msg=expr)
        np.testing.assert_array_equal(d, want, err_msg=expr)
    empty = L("function(ty) local e = torch.Tensor():type(ty) return e:lshift(3), torch.cbitxor(e, e), e:bitor(1) end")(
        cuda_type(dtype))
    assert all(host(t).size == 0 for t in empty)


def test_shifts_of_floating_types_scale_by_powers_of_two(xp, rng):
    """Float and Double shifts are torch7's products and quotients by 2^count (fractional and
    negative counts too), on either device; CudaHalfTensor computes them alike."""
    x = (rng.standard_normal((3, 4)) * 10).astype(np.float32)
    y = np.array([-2.5, -1, 0, 0.5, 1, 3, 7, -8, 2, 0.25, 4, -3], dtype=np.float32).reshape(3, 4)
    code = "function(x, y) return torch.lshift(x, 3), x:clone():rshift(2), torch.lshift(x, -1), " \
           "torch.clshift(x, y), x:clone():crshift(y) end"
    X, Y = x.astype(np.float64), y.astype(np.float64)
    refs = [X * 8, X / 4, X / 2, X * 2 ** Y, X / 2 ** Y]
    for dtype, rtol in [(np.float32, 1e-6), (np.float64, 1e-15)]:
        on_host, on_device = on_both_devices(code, x.astype(dtype), y.astype(dtype))
        for h, d, ref in zip(on_host, on_device, refs):
            np.testing.assert_array_equal(d, h)
            np.testing.assert_allclose(d, ref, rtol=rtol)
    halves = L(code)(strided(x.astype(np.float16)), strided(y.astype(np.float16)))
    X16 = x.astype(np.float16).astype(np.float64)
    for d, ref in zip(halves, [X16 * 8, X16 / 4, X16 / 2, X16 * 2 ** Y, X16 / 2 ** Y]):
        np.testing.assert_allclose(host(d), ref, rtol=1e-3)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.uint8])
def test_clamp_follows_torch7_when_min_exceeds_max(xp, rng, dtype):
    """clamp(lo, hi) is torch7's `x < lo ? lo : (x > hi ? hi : x)` on either device: with lo > hi,
    lo below lo and hi elsewhere (never min(max(x, lo), hi), which is hi throughout); NaN stays."""
    x = np.arange(24).reshape(4, 6).astype(dtype)
    if np.dtype(dtype).kind == "f":
        x = x - 12
        x.ravel()[[0, 5, 11]] = [np.nan, -np.inf, np.inf]
    lo_hi = [(10, 3), (3, 10), (5, 5), (-2, -7)]
    code = "function(x) return " + ", ".join(f"torch.clamp(x, {lo}, {hi})" for lo, hi in lo_hi) + " end"
    on_host, on_device = on_both_devices(code, x)
    for (lo, hi), h, d in zip(lo_hi, on_host, on_device):
        lo, hi = np.array([lo, hi]).astype(dtype)
        want = np.array([lo if v < lo else hi if v > hi else v for v in x.ravel()], dtype=dtype).reshape(x.shape)
        np.testing.assert_array_equal(d, h)
        np.testing.assert_array_equal(d, want)
    small = L("function() return torch.CudaTensor({0, 2, 4, 6}):clamp(3, 1) end")()
    np.testing.assert_array_equal(host(small), [3, 3, 1, 1])   # worked by hand
    assert host(L("function() return torch.CudaTensor(0):clamp(2, 1) end")()).size == 0


def mode_of(row: list) -> tuple[float, int]:
    """The CPU's mode of a row: the most frequent value, the smallest of equally frequent ones,
    and its last 1-based position; NaN equals nothing, so it is the mode only of an all-NaN row
    (at its first position, where the stable sort leaves it first)."""
    counts = Counter(v for v in row if v == v)
    if not counts:
        return float("nan"), 1
    most = max(counts.values())
    value = min(v for v, c in counts.items() if c == most)
    return value, max(i for i, v in enumerate(row) if v == value) + 1


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64])
def test_mode_matches_the_cpu(xp, rng, dtype):
    """mode on CUDA tensors: the CPU's values and positions along every dim, ties going to the
    smallest value at its last occurrence."""
    a = rng.integers(0, 4, (5, 7)).astype(dtype)
    a[0] = [1, 2, 2, 1, 3, 0, 5]      # 1 and 2 twice each: 1, last seen at 4
    a[1] = [6, 5, 4, 3, 2, 1, 0]      # all once: the smallest, 0
    if dtype != np.int64:
        a[2] = [np.nan, 2, np.nan, 3, 2, np.nan, 1]   # NaNs are never equal: 2
        a[3] = np.nan
    code = "function(x) local v1, i1 = x:mode(1) local v2, i2 = torch.mode(x) return v1, i1, v2, i2 end"
    on_host, on_device = on_both_devices(code, a)
    refs = [mode_of(list(col)) for col in a.T], [mode_of(list(row)) for row in a]
    wants = [np.array([v for v, _ in refs[0]])[None], np.array([i for _, i in refs[0]])[None],
             np.array([v for v, _ in refs[1]])[:, None], np.array([i for _, i in refs[1]])[:, None]]
    for h, d, want in zip(on_host, on_device, wants):
        np.testing.assert_array_equal(d, h)
        np.testing.assert_array_equal(d, want)
    cube = np.stack([a, a[::-1]], 2)   # 5 x 7 x 2, its mode along the 5 through a permuted view
    v, i = L("function(x) return torch.mode(x:permute(2, 1, 3), 2) end")(dev(cube, cuda_type(dtype)))
    refs = [[mode_of(list(cube[:, j, k])) for k in range(2)] for j in range(7)]
    np.testing.assert_array_equal(host(v)[:, 0], [[value for value, _ in row] for row in refs])
    np.testing.assert_array_equal(host(i)[:, 0], [[at for _, at in row] for row in refs])
    values, positions = L("function() return torch.CudaTensor(0, 5):mode(2) end")()
    assert host(values).shape == (0, 1) and host(positions).shape == (0, 1)


def test_histc_and_bhistc_match_the_cpu(xp, rng):
    """histc and bhistc of CUDA tensors: nbins equal bins over [min, max] (max in the last one,
    values outside and NaN left out), the data's range when min == max (one wider on each side
    when that is a single value too), the bounds of a CudaTensor as float32 values, as a
    FloatTensor's; the result of the input's type. Hand-worked counts, and numpy's histogram."""
    hand = [  # (Lua expression over the CUDA tensor type T, the counts worked by hand)
        ("T({0, 1, 2, 3, 4, -1, 5, 0/0}):histc(4, 0, 4)", [1, 1, 1, 2]),
        ("T({1, 2, 3}):histc(5)", [1, 0, 1, 0, 1]),            # min == max == 0: the data's range [1, 3]
        ("torch.histc(T({1, 2, 3}), 5, 9, 9)", [1, 0, 1, 0, 1]),
        ("T({3, 3, 3}):histc(4)", [0, 0, 3, 0]),                # one value: [2, 4]
        ("T(0):histc(3)", [0, 0, 0]),
        ("torch.bhistc(T({{0, 1, 1}, {2, 2, 2}}), 2, 0, 2)", [[1, 2], [0, 3]]),
    ]
    for type_name in ["CudaTensor", "CudaDoubleTensor", "FloatTensor"]:
        results = L("function(T) return " + ", ".join(e for e, _ in hand) + " end")(
            luabridge.eval(f"torch.{type_name}"))
        for (expr, want), r in zip(hand, results):
            np.testing.assert_array_equal(host(r), want, err_msg=f"{type_name}: {expr}")
            assert L("function(r) return torch.type(r) end")(r) == f"torch.{type_name}"
    tenth = np.array([0, 0.1], dtype=np.float32)   # float32(0.1) lies above the double 0.1
    f, d, h = L("""function(x)
      return x:cuda():histc(2, 0, 0.1), x:cudaDouble():histc(2, 0, 0.1), x:histc(2, 0, 0.1)
    end""")(tenth)
    np.testing.assert_array_equal(host(f), [1, 1])   # bounds 0 and float32(0.1): the last bin
    np.testing.assert_array_equal(host(d), [1, 0])   # bounds 0 and 0.1: above max
    np.testing.assert_array_equal(host(h), [1, 1])
    for dtype in (np.float32, np.float64):
        x = (rng.standard_normal((3, 200)) * 1.5).astype(dtype)
        on_host, on_device = on_both_devices(
            "function(x) return x:histc(10, -2, 2), torch.bhistc(x, 6, -1, 1), x:histc(7) end", x)
        lo, hi = x.min(), x.max()
        wants = [np.histogram(x, 10, (-2, 2))[0], np.stack([np.histogram(row, 6, (-1, 1))[0] for row in x]),
                 np.histogram(x, 7, (lo, hi))[0]]
        for h, d, want in zip(on_host, on_device, wants):
            np.testing.assert_array_equal(d, h)
            np.testing.assert_array_equal(d, want)


def test_one_scratch_helper_serves_both_devices(xp):
    """backend.scratch (the nn ops' intermediate tensor): one per element type, so one per device,
    resized to the tensor asked for."""
    same, apart, size, kinds = L("""function()
      local backend = require 'torch.backend'
      local a, b = backend.scratch(torch.CudaTensor(2, 3)), backend.scratch(torch.CudaTensor(5))
      local h = backend.scratch(torch.FloatTensor(4))
      return a == b, a ~= h and backend.scratch(torch.CudaDoubleTensor(1)) ~= a, b:nElement(),
             torch.type(b) .. ' ' .. torch.type(h)
    end""")()
    assert same and apart and size == 5 and kinds == "torch.CudaTensor torch.FloatTensor"


# ----------------------------------------------------------------------------------------------
# errors: checked in Lua with the CPU wording, operands left unchanged

def test_validation_errors(xp, rng):
    a = f32(rng, 2, 3)
    x = dev(a)
    assert_lua_errors([
        ("function(x) return x:cmul(torch.CudaTensor(4)) end",
         r"cmul: inconsistent tensor size, 2x3 \(6 elements\) and 4 \(4 elements\)"),
        ("function(x) return x:cmul(torch.FloatTensor(2, 3)) end",
         "cmul: expected torch.CudaTensor, got torch.FloatTensor"),
        ("function(x) return x:add(torch.CudaDoubleTensor(2, 3)) end",
         "add: expected torch.CudaTensor, got torch.CudaDoubleTensor"),
        ("function(x) return x:add('a') end", r"add: invalid arguments \(torch.CudaTensor, string\)"),
        ("function(x) return x:sum(3) end", "sum: dimension 3 out of range of 2D tensor"),
        ("function() return torch.CudaLongTensor(2):exp() end",
         "exp: torch.CudaLongTensor is not supported; torch7 has exp for torch.CudaTensor, "
         "torch.CudaDoubleTensor and torch.CudaHalfTensor only"),
        ("function() return torch.CudaTensor():max() end", "max: the tensor has no elements"),
        ("function(x) return x:topk(4) end", "topk: k = 4 out of range for dimension 2 of size 3"),
        ("function() return torch.CudaLongTensor(2):div(0.5) end",
         r"div: integer division by zero \(torch.CudaLongTensor\)"),
        ("function(x) return x:histc(0) end", "histc: the number of bins must be a positive integer, got 0"),
        ("function() return torch.CudaLongTensor(2):histc() end",
         "histc: expected a torch.CudaTensor, torch.CudaDoubleTensor or torch.CudaHalfTensor, got torch.CudaLongTensor"),
        ("function(x) return x:view(6):bhistc() end", "bhistc: expected a 2D tensor, got 6"),
    ], x)   # Lua drops the arguments a function does not take
    np.testing.assert_array_equal(host(x), a)


def test_array_module_from_the_environment(monkeypatch):
    monkeypatch.setenv(cuda.ENV_VAR, "numpy")
    assert cuda._detect() is np


def test_no_device_message(lua):
    try:
        import cupy  # noqa: F401
        pytest.skip("CuPy is installed: the no-device message is not reachable")
    except ImportError:
        pass
    cuda.use_array_module(None)
    with pytest.raises(luabridge.LuaError, match="torch.CudaStorage: no CUDA device: CuPy is not installed"):
        L("function() return torch.CudaTensor(2) end")()


# ----------------------------------------------------------------------------------------------
# interop and memory

def test_device_views_and_from_device_array(xp, rng):
    a = f32(rng, 4, 6)
    base = xp.asarray(a)
    t = cuda.from_device_array(base[::2, 1:5])        # non-contiguous, zero copy
    np.testing.assert_array_equal(host(t), a[::2, 1:5])
    L("function(t) t:fill(3) end")(t)
    assert (cuda.to_host(base)[::2, 1:5] == 3).all()   # the Lua tensor shares the array's memory
    v = luabridge.to_numpy(t)
    assert isinstance(v, xp.ndarray)
    v[0, 0] = -1
    assert L("function(t) return t[1][1] end")(t) == -1
    proxy = luabridge.wrap(t)
    assert proxy.__dlpack_device__()[0] == (1 if xp is np else 2)
    assert L("function(t) return torch.type(t) end")(cuda.from_device_array(xp.arange(3, dtype=xp.int64))) == \
        "torch.CudaLongTensor"


def test_storages_are_released(xp):
    registry = bridge().buffers
    L("function() for _ = 1, 3 do collectgarbage() end; torch.CudaTensor(1) end")()
    before = len(registry)
    L("function() for i = 1, 50 do local t = torch.CudaTensor(100):fill(i) end end")()
    L("function() for _ = 1, 3 do collectgarbage() end; torch.CudaTensor(1) end")()
    gc.collect()
    assert len(registry) <= before + 2
