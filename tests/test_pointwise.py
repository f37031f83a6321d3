"""Elementwise math (lua/torch/math/pointwise.lua, operators.lua; the CPU kernels of
lua/torch/backend/cpu/pointwise.lua) against numpy float64.

Every op runs on random shapes in several layouts (contiguous, transposed, narrowed, strided,
1-D, zero-size), in its function form (new result, given result) and its method forms, on the
LuaJIT kernels and on numpy's loops (the `path` fixture moves the size thresholds).
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import luabridge
from helpers import (FLOATS, INTEGERS, NP, assert_lua_errors, c_cast, call, check_forms, expect, lua_fn, method,
                     operands, values)


# ----------------------------------------------------------------------------------------------
# one source tensor

def _round(x):
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


UNARY = {
    # name: (reference, input domain, types)
    "exp": (np.exp, "any", FLOATS),
    "log": (np.log, "positive", FLOATS),
    "log1p": (np.log1p, "positive", FLOATS),
    "sqrt": (np.sqrt, "positive", FLOATS),
    "rsqrt": (lambda x: 1 / np.sqrt(x), "positive", FLOATS),
    "sigmoid": (lambda x: 1 / (1 + np.exp(-x)), "any", FLOATS),
    "sin": (np.sin, "any", FLOATS),
    "cos": (np.cos, "any", FLOATS),
    "tan": (np.tan, "unit", FLOATS),
    "asin": (np.arcsin, "unit", FLOATS),
    "acos": (np.arccos, "unit", FLOATS),
    "atan": (np.arctan, "any", FLOATS),
    "sinh": (np.sinh, "any", FLOATS),
    "cosh": (np.cosh, "any", FLOATS),
    "tanh": (np.tanh, "any", FLOATS),
    "floor": (np.floor, "any", FLOATS),
    "ceil": (np.ceil, "any", FLOATS),
    "trunc": (np.trunc, "any", FLOATS),
    "round": (_round, "any", FLOATS),
    "frac": (lambda x: x - np.trunc(x), "any", FLOATS),
    "neg": (np.negative, "any", FLOATS),
    "cinv": (lambda x: 1 / x, "nonzero", FLOATS),
    "abs": (np.abs, "nonzero", ["Int", "Long"] + FLOATS),
    "sign": (np.sign, "nonzero", INTEGERS + FLOATS),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(path, rng, name):
    ref, domain, types = UNARY[name]
    for type_name in types:
        for layout, (a,) in operands(rng, type_name, [domain]):
            want = c_cast(ref(a.astype(np.float64)), type_name)
            check_forms(name, [a], want, type_name)


def test_unary_special_values(path, lua):
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 2.5, -2.5, 0.5, -0.5, 1e-30] * 8)
    for name, ref in (("round", _round), ("sign", lambda v: np.nan_to_num(np.sign(v), nan=0.0)),
                      ("floor", np.floor), ("trunc", np.trunc), ("frac", lambda v: v - np.trunc(v)),
                      ("abs", np.abs), ("sigmoid", lambda v: 1 / (1 + np.exp(-v))), ("log1p", np.log1p)):
        with np.errstate(all="ignore"):
            want = ref(x)
        for t in FLOATS:
            got = luabridge.to_numpy(call(name, x.astype(NP[t])))
            np.testing.assert_allclose(got, want.astype(NP[t]), rtol=1e-6, atol=0, equal_nan=True, err_msg=name)


def test_number_forms(lua):
    assert call("exp", 1.0) == pytest.approx(np.e)
    assert call("abs", -3) == 3
    assert call("pow", 2, 10) == 1024
    assert call("atan2", 1.0, 2.0) == pytest.approx(np.arctan2(1.0, 2.0))
    assert call("lerp", 1.0, 3.0, 0.25) == pytest.approx(1.5)
    assert (call("round", 2.5), call("round", -2.5)) == (3, -3)
    assert call("sigmoid", 0.0) == 0.5
    assert call("frac", -1.75) == -0.75
    assert call("log1p", 1e-20) == 1e-20


# ----------------------------------------------------------------------------------------------
# a source tensor and a number

def _int_div(a, v, t):
    return np.trunc(a / v) if t in INTEGERS else a / v


SCALAR = {
    # name: (reference(a, v, type), domain, values, types)
    "mul": (lambda a, v, t: a * v, "any", [2.5, -3.0, 0.0], INTEGERS + FLOATS),
    "div": (_int_div, "any", [2.0, -3.0, 0.5], INTEGERS + FLOATS),
    "fmod": (lambda a, v, t: np.fmod(a, v), "any", [2.0, -3.0, 0.7], INTEGERS + FLOATS),
    "mod": (lambda a, v, t: np.fmod(a, v), "any", [3.0], INTEGERS + FLOATS),
    "remainder": (lambda a, v, t: a - v * np.floor(a / v), "any", [2.0, -3.0, 0.7], INTEGERS + FLOATS),
}


@pytest.mark.parametrize("name", sorted(SCALAR))
def test_scalar(path, rng, name):
    ref, domain, vals, types = SCALAR[name]
    for type_name in types:
        for v in vals:
            cast = float(c_cast(v, type_name))  # torch7 casts the value to the type first
            if cast == 0 and name != "mul":
                continue
            for layout, (a,) in operands(rng, type_name, [domain]):
                with np.errstate(all="ignore"):
                    want = c_cast(ref(a.astype(np.float64), cast, type_name), type_name)
                check_forms(name, [a, v], want, type_name)


def test_add_and_csub_forms(path, rng):
    for type_name in INTEGERS + FLOATS:
        for layout, (a, b) in operands(rng, type_name, ["any", "any"]):
            x, y = a.astype(np.float64), b.astype(np.float64)
            for sign, name in ((1, "add"), (-1, "csub")):
                check_forms(name, [a, 2.0], c_cast(x + sign * 2.0, type_name), type_name)
                check_forms(name, [a, b], c_cast(x + sign * y, type_name), type_name)
                check_forms(name, [a, 3.0, b], c_cast(x + sign * 3.0 * y, type_name), type_name)
                # x:add(v, y) and x:add(y): the source defaults to x
                z = a.copy()
                method(name, z, 3.0, b)
                expect(z, c_cast(x + sign * 3.0 * y, type_name), type_name, f"x:{name}(v, y)")
                z = a.copy()
                method(name, z, b)
                expect(z, c_cast(x + sign * y, type_name), type_name, f"x:{name}(y)")


def test_byte_arithmetic_wraps_as_c(lua):
    a = np.array([200, 10, 255], np.uint8)
    expect(call("add", a, 100), np.array([44, 110, 99], np.uint8), "Byte", "add")
    expect(call("add", a, -1), np.array([199, 9, 254], np.uint8), "Byte", "add -1")
    expect(call("mul", a, 2), np.array([144, 20, 254], np.uint8), "Byte", "mul")
    c = np.array([-128, 127, -7], np.int8)
    expect(call("div", c, -1), np.array([-128, -127, 7], np.int8), "Char", "div")


@pytest.mark.parametrize("v", [1, 2, 3, 0.5, -0.5, -1, -2, 1.7, 0])
def test_pow(path, rng, v):
    for type_name in FLOATS:
        for layout, (a,) in operands(rng, type_name, ["positive"]):
            want = c_cast(np.power(a.astype(np.float64), v), type_name)
            check_forms("pow", [a, v], want, type_name)
            # v ^ a: torch.pow([res,] v, a)
            base = abs(v) + 1.5
            want = c_cast(np.power(base, a.astype(np.float64)), type_name)
            check_forms("pow", [base, a], want, type_name, src_optional=False)


def test_tpow_in_place_as_documented(lua):
    x = np.array([1.0, 2.0, 3.0])
    call("pow", x, 2.0, x)  # torch.pow(x, n, x): x = n ^ x
    np.testing.assert_allclose(x, [2.0, 4.0, 8.0])


def test_clamp(path, rng):
    for type_name in INTEGERS + FLOATS:
        for lo, hi in ((-1.5, 2.5), (2.0, 2.0), (3.0, -1.0)):  # torch7's rule also when min > max
            clo, chi = (float(c_cast(x, type_name)) for x in (lo, hi))
            for layout, (a,) in operands(rng, type_name, ["any"]):
                x = a.astype(np.float64)
                want = c_cast(np.where(x < clo, clo, np.where(x > chi, chi, x)), type_name)
                check_forms("clamp", [a, lo, hi], want, type_name)


def test_clamp_keeps_nan(lua):
    x = np.array([np.nan, -5.0, 5.0, 0.5] * 30)
    got = luabridge.to_numpy(call("clamp", x, 0.0, 1.0))
    np.testing.assert_array_equal(got, [np.nan, 0.0, 1.0, 0.5] * 30)


# ----------------------------------------------------------------------------------------------
# two source tensors

def _cdiv(a, b, t):
    return np.trunc(a / b) if t in INTEGERS else a / b


BINARY = {
    # name: (reference(a, b, type), domains, types)
    "cmul": (lambda a, b, t: a * b, ["any", "any"], INTEGERS + FLOATS),
    "cdiv": (_cdiv, ["any", "nonzero"], INTEGERS + FLOATS),
    "cpow": (lambda a, b, t: np.trunc(a ** b) if t in INTEGERS else a ** b, ["positive", "unit"], FLOATS),
    "cfmod": (lambda a, b, t: np.fmod(a, b), ["any", "nonzero"], INTEGERS + FLOATS),
    "cmod": (lambda a, b, t: np.fmod(a, b), ["any", "nonzero"], INTEGERS + FLOATS),
    "cremainder": (lambda a, b, t: a - b * np.floor(a / b), ["any", "nonzero"], INTEGERS + FLOATS),
    "atan2": (lambda a, b, t: np.arctan2(a, b), ["any", "any"], FLOATS),
}


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary(path, rng, name):
    ref, domains, types = BINARY[name]
    for type_name in types:
        for layout, (a, b) in operands(rng, type_name, domains):
            want = c_cast(ref(a.astype(np.float64), b.astype(np.float64), type_name), type_name)
            check_forms(name, [a, b], want, type_name)


def test_integer_cpow(lua):
    a = np.array([2, 3, -2, 5], np.int32)
    b = np.array([3, 2, 3, 0], np.int32)
    for t in ("Int", "Long", "Short"):
        expect(call("cpow", a.astype(NP[t]), b.astype(NP[t])), np.array([8, 9, -8, 1], NP[t]), t, "cpow")


def test_same_element_count_any_shape(lua, rng):
    a = rng.standard_normal((2, 6))
    b = rng.standard_normal((3, 4))
    got = call("cmul", a, b)
    expect(got, a * b.reshape(2, 6), "Double", "cmul of 2x6 and 3x4")
    got = call("add", a, 2.0, b)
    expect(got, a + 2 * b.reshape(2, 6), "Double", "add of 2x6 and 3x4")


def test_lerp(path, rng):
    for type_name in FLOATS:
        for layout, (a, b) in operands(rng, type_name, ["any", "any"]):
            x, y = a.astype(np.float64), b.astype(np.float64)
            check_forms("lerp", [a, b, 0.3], c_cast(x + 0.3 * (y - x), type_name), type_name)


@pytest.mark.parametrize("name", ["addcmul", "addcdiv"])
def test_addcmul_addcdiv(path, rng, name):
    for type_name in INTEGERS + FLOATS:
        for layout, (t, a, b) in operands(rng, type_name, ["any", "any", "nonzero"]):
            x, y, z = (u.astype(np.float64) for u in (t, a, b))
            for v in (1.0, 2.0):
                term = y * z if name == "addcmul" else y / z
                if type_name in INTEGERS and name == "addcdiv":
                    term = np.trunc(v * y / z) / v
                want = c_cast(x + v * term, type_name)
                args = [t, v, a, b] if v != 1.0 else [t, a, b]
                check_forms(name, args, want, type_name)


# ----------------------------------------------------------------------------------------------
# numpy's loops: overlap, alignment, large sizes

def test_large_contiguous_uses_the_same_semantics(lua, rng):
    for t in FLOATS:
        a = rng.uniform(-3, 3, 5000).astype(NP[t])
        b = rng.uniform(0.5, 2, 5000).astype(NP[t])
        for name, want in (("exp", np.exp(a.astype(np.float64))), ("tanh", np.tanh(a.astype(np.float64))),
                           ("sigmoid", 1 / (1 + np.exp(-a.astype(np.float64))))):
            expect(call(name, a), c_cast(want, t), t, name)
        expect(call("cdiv", a, b), c_cast(a.astype(np.float64) / b, t), t, "cdiv")
        expect(call("cmax", a, 0.5), c_cast(np.maximum(a, 0.5), t), t, "cmax")


def test_partly_overlapping_result_reads_in_order(path, lua):
    # r is a shifted by one element in the same memory: torch7's loops go element by element,
    # each reading what the step before wrote
    buf = np.zeros(201)
    call("add", buf[1:], buf[:-1], 1.0)
    expect(buf, np.arange(201.0), "Double", "overlapping add")


def test_unaligned_memory(lua):
    raw = np.zeros(4 * 300 + 1, np.uint8)
    arr = np.ndarray((300,), np.float32, buffer=raw, offset=1)  # float32 elements at odd addresses
    arr[:] = np.linspace(-1, 1, 300, dtype=np.float32)
    expect(call("exp", arr), np.exp(arr.astype(np.float64)).astype(np.float32), "Float", "exp unaligned")


# ----------------------------------------------------------------------------------------------
# the CPU op table (backend/cpu/pointwise.lua), as kernels outside the front end call it

OP_TABLE_CALLS = """function(a, b, c)
  local cpu = require('torch.backend').cpu
  local out = {}
  local function result(type)   -- a new result of a's sizes, kept for the return
    local r = (type or a.new)():resizeAs(a)
    out[#out + 1] = r
    return r
  end
  cpu.unary('tanh', result(), a)
  cpu.binary('max', result(), a, 0.25)
  cpu.binary('sub', result(), a, b)
  cpu.binary('pow', result(), c, 2)
  cpu.binary('tpow', result(), a, 2)
  cpu.binary('lt', result(torch.ByteTensor), a, b)
  cpu.add(result(), a, 2, b)
  cpu.add(result(), a, -1.5)
  cpu.addcmul(result(), a, 0.5, b, c)
  cpu.addcdiv(result(), a, 2, b, c)
  cpu.clamp(result(), a, -0.5, 0.5)
  cpu.lerp(result(), a, b, 0.25)
  cpu.fill(result(), 3)
  cpu.copy(result(torch.LongTensor), a)
  return unpack(out)
end"""


def test_cpu_op_table(path, rng):
    """The ops under the front end, called with checked operands and sized results."""
    for t, transposed in ((t, k) for t in FLOATS for k in (False, True)):
        a = values(rng, (4, 3), t, "any").T if transposed else values(rng, (3, 4), t, "any")
        b, c = values(rng, (3, 4), t, "any"), values(rng, (3, 4), t, "nonzero")
        x, y, z = (v.astype(np.float64) for v in (a, b, c))
        wants = [(np.tanh(x), t), (np.maximum(x, 0.25), t), (x - y, t), (z * z, t), (2 ** x, t),
                 (x < y, "Byte"), (x + 2 * y, t), (x - 1.5, t), (x + 0.5 * y * z, t), (x + 2 * y / z, t),
                 (np.clip(x, -0.5, 0.5), t), (x + 0.25 * (y - x), t), (np.full(x.shape, 3.0), t),
                 (np.trunc(x), "Long")]
        got = lua_fn(OP_TABLE_CALLS)(a, b, c)
        for i, (g, (want, type_name)) in enumerate(zip(got, wants)):
            expect(g, c_cast(want, type_name), type_name, f"op table call {i + 1} ({t})")


def test_fill_zero_copy(lua, rng):
    """fill and zero on every layout and type (zero is one memset when contiguous; fill(-0.0)
    keeps its sign), copy across types and strides; Half through Float."""
    for t in INTEGERS + FLOATS:
        for layout, (a,) in operands(rng, t, ["any"]):
            filled, zeroed = lua_fn("function(a) return a:clone():fill(7), a:zero() end")(a)
            expect(filled, np.full(a.shape, 7, NP[t]), t, f"fill ({layout})")
            expect(a, np.zeros(a.shape, NP[t]), t, f"zero ({layout})")
    d = np.ones((3, 2))
    lua_fn("function(d) d:fill(-0.0) end")(d)
    assert np.signbit(d).all()
    src = values(rng, (4, 3), "Double", "any") * 100
    longs, floats, halves = lua_fn("""function(s)
      local h = torch.HalfTensor(3, 4):t():copy(s)
      return torch.LongTensor(12):copy(s), torch.FloatTensor(2, 6):copy(torch.LongTensor(12):copy(s)), h:float()
    end""")(src.T)
    expect(longs, np.trunc(src.T).ravel().astype(np.int64), "Long", "copy Double -> Long")
    expect(floats, np.trunc(src.T).reshape(2, 6).astype(np.float32), "Float", "copy Long -> Float")
    # elements pair in row-major order of each: h's (4, 3) holds s's (3, 4) row by row
    np.testing.assert_array_equal(luabridge.to_numpy(halves), src.T.reshape(4, 3).astype(np.float16).astype(np.float32))
    assert lua_fn("function() return torch.HalfTensor(2):fill(1.5):float():sum() end")() == 3


def test_op_table_names_a_missing_op(lua):
    with pytest.raises(luabridge.LuaError, match="no_such_op is not available for CPU tensors"):
        lua_fn("function() return require('torch.backend').cpu.no_such_op end")()


# ----------------------------------------------------------------------------------------------
# operators

def test_operators(lua, rng):
    run = lua_fn("""function(a, b, v)
      return a + b, a + v, v + a, a - b, a - v, v - a, a * v, v * a, a / v, a % v, -a
    end""")
    for t in INTEGERS + FLOATS:
        a = values(rng, (3, 4), t, "any")
        b = values(rng, (3, 4), t, "any")
        x, y, v = a.astype(np.float64), b.astype(np.float64), 3.0
        got = run(a, b, v)
        wants = [x + y, x + v, v + x, x - y, x - v, v - x, x * v, v * x, _int_div(x, v, t),
                 x - v * np.floor(x / v), -x]
        for i, (g, w) in enumerate(zip(got, wants)):
            expect(g, c_cast(w, t), t, f"operator {i}")
        np.testing.assert_array_equal(a, c_cast(x, t))  # operands untouched


def test_tensor_products(lua, rng):
    m = rng.standard_normal((3, 4))
    n = rng.standard_normal((4, 2))
    u = rng.standard_normal(4)
    w = rng.standard_normal(4)
    dot, mv, mm = lua_fn("function(m, n, u, w) return u * w, m * u, m * n end")(m, n, u, w)
    assert dot == pytest.approx(u @ w)
    expect(mv, m @ u, "Double", "mv")
    expect(mm, m @ n, "Double", "mm")


def test_operator_errors(lua):
    assert_lua_errors([("function(t) return 2 / t end", "__div: expected a tensor and a number"),
                       ("function(t) return t * t end", "multiplication between 3D and 3D tensors"),
                       ("function(t) return t + 'x' end", "__add: expected two tensors or a tensor and a number")],
                      np.ones((2, 2, 2)))


# ----------------------------------------------------------------------------------------------
# errors

def test_errors(lua):
    f = np.ones((2, 3), np.float32)
    d = np.ones((2, 3))
    i = np.ones(3, np.int32)
    cases = [
        (lambda: call("exp", i), r"exp: torch\.IntTensor is not supported; torch7 has exp for torch\.FloatTensor"),
        (lambda: call("abs", np.ones(3, np.int16)), r"abs: torch\.ShortTensor is not supported"),
        (lambda: call("add", luabridge.eval("torch.HalfTensor(3)"), 1), r"add: torch\.HalfTensor is not supported"),
        (lambda: call("cmul", f, np.ones(5, np.float32)), r"cmul: inconsistent tensor size, 2x3 \(6 elements\) and 5"),
        (lambda: call("cmul", f, d), r"cmul: expected torch\.FloatTensor, got torch\.DoubleTensor"),
        (lambda: call("exp", d, f), r"exp: expected torch\.FloatTensor, got torch\.DoubleTensor"),
        (lambda: call("add", f, "x"), r"add: invalid arguments \(torch\.FloatTensor, string\)"),
        (lambda: call("mul", f), r"mul: invalid arguments \(torch\.FloatTensor\); expected \[res,\] tensor, value"),
        (lambda: call("div", i, 0), r"div: integer division by zero \(torch\.IntTensor\)"),
        (lambda: call("fmod", i, 0.5), r"fmod: integer division by zero"),
        (lambda: call("lerp", f, f), r"lerp: invalid arguments"),
        (lambda: call("pow", i, 2), r"pow: torch\.IntTensor is not supported"),
        (lambda: call("clamp", f, 0), r"clamp: invalid arguments"),
    ]
    for fn, pattern in cases:
        with pytest.raises(luabridge.LuaError, match=pattern):
            fn()


def test_failed_call_leaves_operands_unchanged(lua):
    r = np.full((4, 4), 5.0)
    a = np.ones((2, 3))
    with pytest.raises(luabridge.LuaError, match="inconsistent tensor size"):
        call("cmul", r, a, np.ones(7))
    with pytest.raises(luabridge.LuaError, match="inconsistent tensor size"):
        call("addcmul", r, a, np.ones(6), np.ones(5))
    with pytest.raises(luabridge.LuaError, match="expected torch.DoubleTensor"):
        call("add", r, a, np.ones(6, np.float32))
    rt = luabridge.from_numpy(r)
    with pytest.raises(luabridge.LuaError):
        lua_fn("function(r, a) r:add(a, torch.DoubleTensor(7)) end")(rt, a)
    assert luabridge.eval("function(r) return r:dim(), r:size(1), r:size(2) end")(rt) == (2, 4, 4)
    np.testing.assert_array_equal(r, np.full((4, 4), 5.0))


def test_error_names_the_callers_line(lua):
    code = "local t = torch.LongTensor(2)\nlocal _ = 1\nt:exp()"
    with pytest.raises(luabridge.LuaError, match=r"^mycode:3: exp: torch\.LongTensor is not supported"):
        lua_fn("function(src) assert(loadstring(src, '=mycode'))() end")(code)


# ----------------------------------------------------------------------------------------------
# integer semantics as C (hypothesis)

@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(-2**31 + 1, 2**31 - 1), min_size=1, max_size=20),
       st.integers(-1000, 1000).filter(lambda v: v != 0))
def test_int_division_as_c(lua, xs, v):
    for t in ("Int", "Long"):
        a = np.array(xs, NP[t])
        c_div = np.array([abs(x) // abs(v) * (1 if (x >= 0) == (v > 0) else -1) for x in xs])  # truncated
        expect(call("div", a, v), c_div.astype(NP[t]), t, "div")
        expect(call("fmod", a, v), np.array([x - v * q for x, q in zip(xs, c_div)], NP[t]), t, "fmod")
        expect(call("remainder", a, v), np.array([x % v for x in xs], NP[t]), t, "remainder")


# ----------------------------------------------------------------------------------------------
# numpy's loops as lent by luabridge/backend/ufuncs.py

def test_numpy_loops_are_found_and_checked(monkeypatch):
    from luabridge.providers.torch_cpu import ufuncs

    fn, data = ufuncs.find_loop("add", "ff->f")
    assert fn and ufuncs._agrees(np.add, "ff->f", ufuncs._LOOP(fn), data)
    assert not ufuncs._agrees(np.subtract, "ff->f", ufuncs._LOOP(fn), data)  # a wrong loop is refused
    assert ufuncs.find_loop("exp", "ff->f") is None       # no such signature
    assert ufuncs.find_loop("no_such_ufunc", "f->f") is None
    monkeypatch.setenv("LUABRIDGE_UFUNC", "lua")
    assert ufuncs.find_loop("exp", "f->f") is None


# ----------------------------------------------------------------------------------------------
# numpy's loops on strided operands: one call per 1-D run or per row of a 2-D view

def _wide_layouts(rng, type_name: str):
    """(name, make) per layout whose rows are long enough for numpy's loops row by row:
    make(low, high) gives a fresh 12x40 array in that layout (or 480 elements in 1-D)."""
    def fill(shape, low, high):
        return rng.uniform(low, high, shape).astype(NP[type_name])
    return [
        ("narrowed", lambda lo, hi: fill((12, 100), lo, hi)[:, 30:70]),       # LSTM gates: rows at step 100
        ("transposed", lambda lo, hi: fill((40, 12), lo, hi).T),              # rows at element step 12
        ("row-strided", lambda lo, hi: fill((24, 40), lo, hi)[::2]),
        ("both-strided", lambda lo, hi: fill((12, 120), lo, hi)[:, 1::3]),
        ("1-D strided", lambda lo, hi: fill((1440,), lo, hi)[::3]),
    ]


STRIDED_UNARY = {"sigmoid": lambda x: 1 / (1 + np.exp(-x)), "tanh": np.tanh, "exp": np.exp,
                 "rsqrt": lambda x: 1 / np.sqrt(np.abs(x) + 0.5), "abs": np.abs, "neg": np.negative}
STRIDED_BINARY = {"add": np.add, "csub": np.subtract, "cmul": np.multiply, "cdiv": np.divide, "atan2": np.arctan2}
STRIDED_SCALAR = {"add": lambda x, v: x + v, "mul": lambda x, v: x * v, "div": lambda x, v: x / v,
                  "cmax": np.maximum, "cmin": np.minimum}


@pytest.mark.parametrize("type_name", FLOATS)
def test_strided_rows_every_family(lua, rng, type_name):
    layouts = _wide_layouts(rng, type_name)
    for i, (name, make) in enumerate(layouts):
        result_layout = layouts[(i + 1) % len(layouts)][1]
        other = layouts[(i + 2) % len(layouts)][1]
        a = make(-3, 3)
        b = other(0.5, 2)
        if b.shape != a.shape:
            b = make(0.5, 2)
        r = result_layout(0, 1)
        if r.shape != a.shape:
            r = make(0, 1)
        x, y = a.astype(np.float64), b.astype(np.float64)
        for op, ref in STRIDED_UNARY.items():
            call(op, r, np.abs(a) + NP[type_name](0.5) if op == "rsqrt" else a)
            expect(r, c_cast(ref(x), type_name), type_name, f"{op} {name}")
        for op, ref in STRIDED_BINARY.items():
            call(op, r, a, b)
            expect(r, c_cast(ref(x, y), type_name), type_name, f"{op} {name}")
        for op, ref in STRIDED_SCALAR.items():
            call(op, r, a, 0.25)
            expect(r, c_cast(ref(x, 0.25), type_name), type_name, f"{op} {name} 0.25")
        mask = np.zeros((2,) + a.shape, np.uint8)[0]
        call("lt", mask, a, b)
        np.testing.assert_array_equal(mask, (x < y).astype(np.uint8), err_msg=f"lt {name}")
        call("gt", mask, a, 0.5)
        np.testing.assert_array_equal(mask, (x > 0.5).astype(np.uint8), err_msg=f"gt {name} 0.5")


@pytest.mark.parametrize("type_name", FLOATS)
def test_strided_rows_in_place_and_overlapping(lua, rng, type_name):
    big = rng.uniform(-2, 2, (12, 100)).astype(NP[type_name])
    gates = big.astype(np.float64)
    # in place on a narrow: r is a
    method("sigmoid", big[:, 20:60])
    gates[:, 20:60] = 1 / (1 + np.exp(-gates[:, 20:60]))
    expect(big, c_cast(gates, type_name), type_name, "in-place sigmoid of a narrow")
    # sources narrowing the same rows: apart row by row, interleaved overall
    call("cmul", big[:, 60:100], big[:, 0:40], big[:, 20:60])
    gates[:, 60:100] = gates[:, 0:40] * gates[:, 20:60]
    expect(big, c_cast(gates, type_name), type_name, "cmul of narrows of one tensor")
    # r overlaps a within each row (shifted by one element): torch7 reads element by element
    buf = np.zeros((6, 50), NP[type_name])
    call("add", buf[:, 1:41], buf[:, 0:40], 1.0)
    want = np.zeros((6, 50))
    for k in range(1, 41):
        want[:, k] = want[:, k - 1] + 1
    expect(buf, c_cast(want, type_name), type_name, "add into a view one element ahead")
    # a row of r overlapping the next row of a (rows run in order)
    flat = np.arange(100, dtype=NP[type_name])
    want = flat.astype(np.float64)
    for row in range(4):                       # r rows at 10*row, a rows at 10*row + 5
        want[10 * row:10 * row + 10] = want[10 * row + 5:10 * row + 15] * 2
    r = np.lib.stride_tricks.as_strided(flat, (4, 10), (10 * flat.itemsize, flat.itemsize))
    a = np.lib.stride_tricks.as_strided(flat[5:], (4, 10), (10 * flat.itemsize, flat.itemsize))
    call("mul", r, a, 2.0)
    expect(flat, c_cast(want, type_name), type_name, "mul with rows of r overlapping rows of a")
