"""Comparisons, cmax / cmin and the bitwise family (lua/torch/math/compare.lua) against numpy."""
from __future__ import annotations

import numpy as np
import pytest

import luabridge
from helpers import FLOATS, INTEGERS, NP, c_cast, call, check_forms, expect, lua_fn, method, operands

UNSIGNED = {"Byte": np.uint8, "Char": np.uint8, "Short": np.uint16, "Int": np.uint32, "Long": np.uint64}

COMPARISONS = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
               "eq": np.equal, "ne": np.not_equal}


@pytest.mark.parametrize("name", sorted(COMPARISONS))
def test_comparisons(path, rng, name):
    ref = COMPARISONS[name]
    for type_name in INTEGERS + FLOATS:
        for layout, (a, b) in operands(rng, type_name, ["any", "any"]):
            b[..., ::2] = a[..., ::2]  # some equal pairs
            v = float(a.flat[0]) if a.size else 1.0
            for other, want in ((b, ref(a, b)), (v, ref(a.astype(np.float64), v))):
                want = want.astype(np.uint8)
                # torch.lt(a, b), a:lt(b): a new ByteTensor; torch.lt(r, a, b) into a ByteTensor
                expect(call(name, a, other), want, "Byte", f"{name} new")
                expect(method(name, a, other), want, "Byte", f"a:{name} new")
                check_forms(name, [a, other], want, "Byte", src_optional=False)
                # torch.lt(resT, a, b): the result of a's type holds 0 / 1
                r = np.full(a.shape, 9, NP[type_name])
                call(name, r, a, other)
                expect(r, want.astype(NP[type_name]), type_name, f"{name} into a {type_name} result")


def test_comparisons_with_nan(path, lua):
    a = np.array([np.nan, 1.0, 2.0, np.nan] * 20)
    b = np.array([1.0, np.nan, 2.0, np.nan] * 20)
    for name, ref in COMPARISONS.items():
        for t in FLOATS:
            x, y = a.astype(NP[t]), b.astype(NP[t])
            expect(call(name, x, y), ref(a, b).astype(np.uint8), "Byte", name)
            expect(call(name, x, 1.0), ref(a, 1.0).astype(np.uint8), "Byte", name)
            expect(call(name, x, float("nan")), ref(a, np.nan).astype(np.uint8), "Byte", name)


def test_comparison_result_is_resized(lua):
    a = np.arange(6.0).reshape(2, 3)
    r = luabridge.eval("torch.ByteTensor(10)")
    got = lua_fn("function(r, a) return torch.gt(r, a, 2) end")(r, a)
    expect(got, (a > 2).astype(np.uint8), "Byte", "gt resized")


def test_comparison_errors(lua):
    a = np.ones(3)
    with pytest.raises(luabridge.LuaError, match=r"lt: the result must be a torch\.ByteTensor or a torch\.DoubleTensor, "
                                                 r"got torch\.IntTensor"):
        call("lt", np.ones(3, np.int32), a, 1)
    with pytest.raises(luabridge.LuaError, match=r"eq: inconsistent tensor size"):
        call("eq", a, np.ones(4))
    with pytest.raises(luabridge.LuaError, match=r"ge: expected torch\.DoubleTensor, got torch\.FloatTensor"):
        call("ge", a, np.ones(3, np.float32))
    with pytest.raises(luabridge.LuaError, match=r"ne: invalid arguments \(torch\.DoubleTensor, string\)"):
        call("ne", a, "x")


# ----------------------------------------------------------------------------------------------
# cmax, cmin

def test_cmax_cmin(path, rng):
    # torch7: x > y ? x : y and x < y ? x : y, also with nan
    for type_name in INTEGERS + FLOATS:
        for layout, (a, b) in operands(rng, type_name, ["any", "any"]):
            x, y = a.astype(np.float64), b.astype(np.float64)
            for v in (0.0, 2.5, -1.0):
                cv = float(c_cast(v, type_name))
                check_forms("cmax", [a, v], c_cast(np.where(x > cv, x, cv), type_name), type_name)
                check_forms("cmin", [a, v], c_cast(np.where(x < cv, x, cv), type_name), type_name)
            check_forms("cmax", [a, b], c_cast(np.where(x > y, x, y), type_name), type_name)
            check_forms("cmin", [a, b], c_cast(np.where(x < y, x, y), type_name), type_name)


@pytest.mark.parametrize("n", [8, 5000])
def test_cmax_cmin_nan_as_torch7(path, lua, n):
    a = np.tile([np.nan, 1.0, -1.0, 3.0], n // 4)
    b = np.tile([0.0, np.nan, 0.0, np.nan], n // 4)
    for t in FLOATS:
        x, y = a.astype(NP[t]), b.astype(NP[t])
        expect(call("cmax", x, 0.0), np.where(a > 0, a, 0.0), t, "relu")       # nan -> 0
        expect(call("cmin", x, 0.0), np.where(a < 0, a, 0.0), t, "cmin 0")
        expect(call("cmax", x, float("nan")), np.full(n, np.nan), t, "cmax nan")
        expect(call("cmax", x, y), np.where(a > b, a, b), t, "cmax tensors")
        expect(call("cmin", x, y), np.where(a < b, a, b), t, "cmin tensors")


def test_cmax_value_changes(path, lua):
    # numpy's fmax gets the value as an array of copies: a new value refills it
    a = np.linspace(-2, 2, 6000)
    for v in (0.0, 1.0, 0.0, -0.5):
        expect(call("cmax", a, v), np.maximum(a, v), "Double", f"cmax {v}")
        expect(call("cmin", a[:100], v), np.minimum(a[:100], v), "Double", f"cmin {v}")


# ----------------------------------------------------------------------------------------------
# shifts and bitwise ops

def as_type(x, t):
    """Reference values already exact in the type (integers), or to round (floats)."""
    return np.asarray(x).astype(NP[t])


def _shift_left(a, v, t):
    if t in FLOATS:
        return a * 2.0 ** v
    return (a.astype(np.int64) << np.int64(v)).astype(NP[t])


def _shift_right(a, v, t):
    if t in FLOATS:
        return a / 2.0 ** v
    # C shifts the unsigned value: -2 >> 1 in a CharTensor is 127
    u = a.astype(NP[t]).view(UNSIGNED[t])
    return (u >> np.array(v).astype(UNSIGNED[t])).view(NP[t])


@pytest.mark.parametrize("v", [0, 1, 3])
def test_shifts(path, rng, v):
    for type_name in INTEGERS + FLOATS:
        for layout, (a, s) in operands(rng, type_name, ["any", "positive"]):
            s = (s.astype(np.int64) % 5).astype(NP[type_name])
            check_forms("lshift", [a, v], as_type(_shift_left(a, v, type_name), type_name), type_name)
            check_forms("rshift", [a, v], as_type(_shift_right(a, v, type_name), type_name), type_name)
            sl = np.array([_shift_left(x, int(k), type_name) for x, k in zip(a.flat, s.flat)]).reshape(a.shape)
            sr = np.array([_shift_right(np.array(x), int(k), type_name) for x, k in zip(a.flat, s.flat)]).reshape(a.shape)
            check_forms("clshift", [a, s], as_type(sl, type_name), type_name)
            check_forms("crshift", [a, s], as_type(sr, type_name), type_name)


def test_shift_examples(lua):
    expect(call("rshift", np.array([-2, 64], np.int8), 1), np.array([127, 32], np.int8), "Char", "rshift")
    expect(call("rshift", np.array([-1], np.int64), 60), np.array([15], np.int64), "Long", "rshift")
    expect(call("lshift", np.array([3.0]), 2), np.array([12.0]), "Double", "lshift float")
    expect(call("crshift", np.array([32, 32], np.int64), np.array([1, 4], np.int64)),
           np.array([16, 2], np.int64), "Long", "crshift")


BITWISE = {"bitand": np.bitwise_and, "bitor": np.bitwise_or, "bitxor": np.bitwise_xor}


@pytest.mark.parametrize("name", sorted(BITWISE))
def test_bitwise(path, rng, name):
    ref = BITWISE[name]
    for type_name in INTEGERS:
        for layout, (a, b) in operands(rng, type_name, ["any", "any"]):
            for v in (5, -3, 0):
                cv = c_cast(v, type_name)
                check_forms(name, [a, v], ref(a, cv).astype(NP[type_name]), type_name)
            check_forms("c" + name, [a, b], ref(a, b), type_name)


def test_bitwise_errors(lua):
    f = np.ones(3, np.float32)
    for name, args in (("bitand", (f, 1)), ("cbitor", (f, f)), ("bitxor", (np.ones(3), 2))):
        with pytest.raises(luabridge.LuaError, match=rf"{name}: torch\.\w+Tensor is not supported; torch7 has "
                                                     rf"{name} for the integer types only"):
            call(name, *args)


def test_long_bitwise_uses_64_bits(lua):
    a = np.array([2**40 + 5, -(2**50)], np.int64)
    expect(call("bitand", a, 7), a & 7, "Long", "bitand")
    expect(call("lshift", np.array([1], np.int64), 40), np.array([2**40], np.int64), "Long", "lshift")
    expect(call("cbitxor", a, a[::-1].copy()), a ^ a[::-1], "Long", "cbitxor")
