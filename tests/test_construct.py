"""Constructors and structural copies (lua/torch/math/construct.lua) against numpy.

zeros ones range linspace logspace eye diag tril triu reshape repeatTensor cross, in their
torch.f([res,] ...) and method forms, over every element type and non-contiguous views.
"""
import numpy as np
import pytest

import luabridge
from helpers import NP, N, T, assert_lua_error, call, lua_fn, method, views

TYPES = [np.float64, np.float32, np.int32, np.int64, np.uint8, np.int16]
new = lua_fn("function(name) return torch[name .. 'Tensor']() end")


def draw(rng, shape, dtype) -> np.ndarray:
    """Integers 0..99 in every type: products (cross) are exact even in float32."""
    return rng.integers(0, 100, size=shape).astype(dtype)


@pytest.mark.parametrize("name, value", [("zeros", 0), ("ones", 1)])
def test_zeros_ones(lua, name, value):
    got = N(call(name, 2, 3))
    assert got.dtype == np.float64 and got.shape == (2, 3) and (got == value).all()
    assert N(call(name, luabridge.eval("torch.LongStorage{4, 1}"))).shape == (4, 1)
    for tname, dtype in NP.items():
        r = new(tname)
        method(name, r, 3, 2)
        assert N(r).shape == (3, 2) and N(r).dtype == dtype and (N(r) == value).all()
        r2 = new(tname)
        assert N(call(name, r2, 5)).shape == (5,)
    h = method(name, new("Half"), 2, 2)
    assert (N(h) == value).all()
    # a result of the right size is filled where it lies
    big = np.full((3, 4), 7.0)
    method(name, T(big[:, ::2]), 3, 2)
    assert (big[:, ::2] == value).all() and (big[:, 1::2] == 7).all()


@pytest.mark.parametrize("args, ref", [
    ((1, 5), np.arange(1, 6)),
    ((0, 1), np.array([0, 1])),
    ((1, 0, -1), np.array([1, 0])),
    ((1, 1, -1), np.array([1])),
    ((0, 1, 0.3), np.array([0, 0.3, 0.6, 0.9])),
    ((5, -2.5, -1.5), np.array([5, 3.5, 2, 0.5, -1, -2.5])),
])
def test_range(args, ref):
    np.testing.assert_allclose(N(call("range", *args)), ref, rtol=1e-15, atol=1e-15)


def test_range_counts_and_types(lua):
    assert N(method("range", new("Float"), 0.6, 0.9, 0.1)).shape == (4,)
    assert N(method("range", new("Double"), 1, 10, 0.3)).shape == (31,)
    np.testing.assert_array_equal(N(method("range", new("Int"), -3, 3, 2)), [-3, -1, 1, 3])
    x = np.zeros((2, 3))
    method("range", T(x[:, 1:]), 0, 3)   # same element count: filled in place, row-major
    np.testing.assert_array_equal(x, [[0, 0, 1], [0, 2, 3]])


@pytest.mark.parametrize("name, ref", [("linspace", np.linspace), ("logspace", np.logspace)])
def test_linspace_logspace(name, ref):
    np.testing.assert_allclose(N(call(name, 0.25, 1.75, 7)), ref(0.25, 1.75, 7), rtol=1e-13)
    np.testing.assert_allclose(N(call(name, 2, 0, 3)), ref(2, 0, 3), rtol=1e-13)
    assert N(call(name, 0, 1)).shape == (100,)
    np.testing.assert_allclose(N(call(name, 1, 1, 1)), ref(1, 1, 1))
    np.testing.assert_allclose(N(method(name, new("Float"), -1, 1, 5)), ref(-1, 1, 5), rtol=1e-6)
    x = np.zeros((2, 3))
    method(name, T(x[:, 1:]), 0, 3, 4)
    np.testing.assert_allclose(x[:, 1:].ravel(), ref(0, 3, 4), rtol=1e-13)
    assert (x[:, 0] == 0).all()


def test_eye(lua):
    np.testing.assert_array_equal(N(call("eye", 4)), np.eye(4))
    np.testing.assert_array_equal(N(call("eye", 2, 5)), np.eye(2, 5))
    np.testing.assert_array_equal(N(call("eye", 5, 2)), np.eye(5, 2))
    for tname, dtype in NP.items():
        r = method("eye", new(tname), 3)
        np.testing.assert_array_equal(N(r), np.eye(3, dtype=dtype))
    big = np.full((3, 6), 9.0)
    method("eye", T(big[:, ::2]), 3, 3)
    np.testing.assert_array_equal(big[:, ::2], np.eye(3))
    assert (big[:, 1::2] == 9).all()


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("k", [0, 2, -1, -4, 9])
def test_diag(rng, dtype, k):
    m = draw(rng, (4, 6), dtype)
    for mv in views(m):
        np.testing.assert_array_equal(N(call("diag", T(mv), k)), np.diag(m, k))
        np.testing.assert_array_equal(N(method("diag", T(mv), k)), np.diag(m, k))
    v = draw(rng, 9, dtype)[::-2]
    np.testing.assert_array_equal(N(call("diag", T(v), k)), np.diag(v, k))
    r_t = call("diag", T(np.full((2, 2), 5, dtype)), T(v), k)   # the result is resized
    np.testing.assert_array_equal(N(r_t), np.diag(v, k))


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("shape", [(5, 5), (3, 6), (6, 3)])
@pytest.mark.parametrize("k", [0, 1, -2, 7, -7])
def test_tril_triu(rng, dtype, shape, k):
    m = draw(rng, shape, dtype)
    for mv in views(m):
        np.testing.assert_array_equal(N(call("tril", T(mv), k)), np.tril(m, k))
        np.testing.assert_array_equal(N(call("triu", T(mv), k)), np.triu(m, k))
        np.testing.assert_array_equal(N(method("triu", T(mv), k)), np.triu(m, k))
    r = np.zeros(shape[::-1], dtype).T
    call("tril", T(r), T(m), k)
    np.testing.assert_array_equal(r, np.tril(m, k))
    inplace = m.copy()
    call("triu", T(inplace), T(inplace), k)
    np.testing.assert_array_equal(inplace, np.triu(m, k))


@pytest.mark.parametrize("dtype", TYPES)
def test_reshape(rng, dtype):
    x = draw(rng, (4, 6), dtype)
    for xv in views(x):
        got = call("reshape", T(xv), 3, 8)
        np.testing.assert_array_equal(N(got), x.reshape(3, 8))
        np.testing.assert_array_equal(N(method("reshape", T(xv), luabridge.eval("torch.LongStorage{2, 12}"))),
                                      x.reshape(2, 12))
    r = np.zeros(30, dtype)
    got = call("reshape", T(r), T(x), 24)
    np.testing.assert_array_equal(N(got), x.ravel())


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("shape, reps", [((2, 3), (2, 2)), ((3,), (2, 1, 3)), ((2, 1, 2), (1, 3, 2)), ((4,), (1,))])
def test_repeat_tensor(rng, dtype, shape, reps):
    x = draw(rng, shape, dtype)
    for xv in views(x) if len(shape) > 1 else [x, x[::-1].copy()[::-1]]:
        np.testing.assert_array_equal(N(method("repeatTensor", T(xv), *reps)), np.tile(x, reps))
        np.testing.assert_array_equal(N(call("repeatTensor", T(xv), *reps)), np.tile(x, reps))
    into = lua_fn("function(r, x, ...) return r:repeatTensor(x, torch.LongStorage({...})) end")
    res = T(np.zeros(3, dtype))
    into(res, T(x), *reps)
    np.testing.assert_array_equal(N(res), np.tile(x, reps))


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int32, np.int64])
def test_cross(rng, dtype):
    a, b = draw(rng, (4, 3, 5), dtype) - 50, draw(rng, (4, 3, 5), dtype) - 50
    ref = np.cross(a.astype(np.float64), b, axis=1)
    np.testing.assert_allclose(N(call("cross", T(a), T(b))), ref)
    np.testing.assert_allclose(N(call("cross", T(a), T(b), 2)), ref)
    np.testing.assert_allclose(N(method("cross", T(a), T(b))), ref)
    a3, b3 = draw(rng, (3, 3), dtype), draw(rng, (3, 3), dtype)
    np.testing.assert_allclose(N(call("cross", T(a3.T), T(b3.T), 2)), np.cross(a3.T.astype(np.float64), b3.T, axis=1))
    r = np.zeros((2, 2), dtype)
    got = call("cross", T(r), T(a3), T(b3))
    np.testing.assert_allclose(N(got), np.cross(a3.astype(np.float64), b3, axis=0))
    inplace = a3.copy()
    call("cross", T(inplace), T(inplace), T(b3), 1)
    np.testing.assert_allclose(inplace, np.cross(a3.astype(np.float64), b3, axis=0))


@pytest.mark.parametrize("code, message", [
    ("torch.range(1, 2, 0)", "range: step must be a non-null number"),
    ("torch.range(2, 1)", "range: upper bound 1 and lower bound 2 incoherent with step sign 1"),
    ("torch.range(1, 2, -1)", "incoherent with step sign -1"),
    ("torch.linspace(0, 1, 1)", "linspace: invalid number of points 1"),
    ("torch.logspace(0, 1, 0)", "logspace: invalid number of points 0"),
    ("torch.linspace(0, 1, 0/0)", "linspace: number of points must be an integer"),
    ("torch.zeros(2, 1/0)", "zeros: sizes must be non-negative integers"),
    ("torch.eye(0)", "eye: n must be positive"),
    ("torch.diag(torch.Tensor(2, 2, 2))", "diag: matrix or a vector expected, got a 3D tensor"),
    ("torch.tril(torch.Tensor(3))", "tril: expected a matrix, got a 1D tensor"),
    ("torch.reshape(torch.Tensor(2, 3), 4, 2)", "reshape: size 4x2 (8 elements) does not match tensor 2x3 (6 elements)"),
    ("torch.Tensor(2, 3):repeatTensor(2)", "repeatTensor: 1 repeat counts for a 2D tensor"),
    ("torch.cross(torch.Tensor(3, 2), torch.Tensor(3, 3))", "cross: inconsistent tensor sizes 3x2, 3x3"),
    ("torch.cross(torch.Tensor(4, 2), torch.Tensor(4, 2))", "cross: no dimension of size 3 in 4x2"),
    ("torch.cross(torch.Tensor(3, 2), torch.Tensor(3, 2), 2)", "cross: dimension 2 does not have size 3"),
    ("torch.zeros(2, -1)", "zeros: sizes must be non-negative integers"),
    ("torch.diag(torch.Tensor(3), torch.FloatTensor(3))", "diag: expected torch.DoubleTensor, got torch.FloatTensor"),
])
def test_errors(lua, code, message):
    assert_lua_error(code, message)


def test_fractional_sizes_truncate_as_torch7(lua):
    """torch7's C code cast sizes and counts to long: finite fractions truncate toward zero."""
    sizes = lua.execute("""return torch.rand(2, 3.7):size(2), torch.Tensor(2.5):size(1), torch.linspace(0, 1, 4.9):size(1),
                           torch.zeros({1.2, 2.9}):size(2), torch.FloatTensor(3, 0.4):nElement()""")
    assert sizes == (3, 2, 4, 2, 0)


def test_half_storage_from_a_table_holds_the_numbers():
    """Half elements are IEEE binary16 bit patterns: a table's numbers convert, as numpy's float16."""
    values = [1.0, -2.5, 65504.0, 1e-3]
    got = lua_fn("function(v) local s = torch.HalfStorage(v) return torch.FloatStorage(#s):copy(s):totable() end")(
        luabridge.eval("{1, -2.5, 65504, 1e-3}"))
    want = np.asarray(values, dtype=np.float16).astype(np.float64)
    np.testing.assert_array_equal([got[i] for i in range(1, len(values) + 1)], want)
