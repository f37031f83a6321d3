"""Sorting (lua/torch/math/sort.lua): sort topk kthvalue median mode, against numpy.

Conventions checked: results keep the dimension (size 1 for kthvalue/median/mode, k for topk);
indices are 1-based LongTensors; the default dimension is the last; slices sort stably (ties
keep their order, which numpy's stable argsort reproduces) and NaN sorts as the largest value;
median is the lower middle element; mode is the smallest most frequent value, at its last
occurrence (torch7's documented behaviour).
"""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import luabridge
from luabridge.core.runtime import bridge
from helpers import N, T, lua_fn


@pytest.fixture(scope="module")
def m(lua):
    return {
        "m": lua_fn("function(x, op, ...) return x[op](x, ...) end"),
        "fn": lua_fn("function(op, ...) return torch[op](...) end"),
    }


def stable_order(a: np.ndarray, axis: int, descending: bool) -> np.ndarray:
    """Positions sorting a along axis, stably, NaN largest (last ascending, first descending)."""
    if not descending:
        return np.argsort(a, axis=axis, kind="stable")
    f = a.astype(np.float64)
    nan = np.isnan(f)
    return np.lexsort((-np.where(nan, 0, f), ~nan), axis=axis)  # stable; the last key first


def layouts(rng, shape, dtype, distinct=False):
    a = rng.permutation(np.prod(shape)).reshape(shape) if distinct else rng.integers(0, 5, shape)
    a = a.astype(dtype)
    yield a
    yield np.ascontiguousarray(np.moveaxis(a, -1, 0)).transpose(list(range(1, a.ndim)) + [0])
    big = np.zeros(tuple(2 * n for n in shape), dtype)
    view = big[tuple(slice(None, None, 2) for _ in shape)]
    view[...] = a
    yield view


DTYPES = [np.float32, np.float64, np.int32, np.int64, np.uint8]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1,), (40,), (5, 37), (3, 4, 50)])
def test_sort_with_ties(m, rng, dtype, shape):
    for a in layouts(rng, shape, dtype):
        for d in range(a.ndim):
            for desc in (False, True):
                vals, inds = m["m"](T(a), "sort", d + 1, desc)
                order = stable_order(a, d, desc)
                np.testing.assert_array_equal(N(inds), order + 1, err_msg=f"dim {d} desc {desc}")
                np.testing.assert_array_equal(N(vals), np.take_along_axis(a, order, d))
    # defaults: the last dim, ascending; torch.sort(x, true) is descending
    vals, inds = m["fn"]("sort", T(a))
    np.testing.assert_array_equal(N(inds), stable_order(a, -1, False) + 1)
    vals, inds = m["fn"]("sort", T(a), True)
    np.testing.assert_array_equal(N(inds), stable_order(a, -1, True) + 1)


def test_sort_nan_and_results(m, rng):
    a = np.array([[3.0, np.nan, -1.0, 2.0, np.nan], [0.5, 0.5, -np.inf, np.inf, 1.0]])
    vals, inds = m["m"](T(a), "sort")
    np.testing.assert_array_equal(N(vals), [[-1, 2, 3, np.nan, np.nan], [-np.inf, 0.5, 0.5, 1, np.inf]])
    np.testing.assert_array_equal(N(inds), [[3, 4, 1, 2, 5], [3, 1, 2, 5, 4]])
    vals, inds = m["m"](T(a), "sort", 2, True)
    np.testing.assert_array_equal(N(vals), [[np.nan, np.nan, 3, 2, -1], [np.inf, 1, 0.5, 0.5, -np.inf]])
    np.testing.assert_array_equal(N(inds), [[2, 5, 1, 4, 3], [4, 5, 1, 2, 3]])
    # results given: written in place (an in-place sort of x itself works too)
    x = rng.standard_normal((4, 6))
    res_v, res_i = np.zeros((4, 6)), np.zeros((4, 6), np.int64)
    m["fn"]("sort", T(res_v), T(res_i), T(x), 1)
    np.testing.assert_array_equal(res_v, np.sort(x, 0))
    np.testing.assert_array_equal(res_i, np.argsort(x, 0) + 1)
    y = x.copy()
    m["fn"]("sort", T(y), luabridge.eval("torch.LongTensor()"), T(y), 2)
    np.testing.assert_array_equal(y, np.sort(x, 1))


@settings(max_examples=40, deadline=None)
@given(hnp.arrays(np.float64, hnp.array_shapes(min_dims=1, max_dims=3, max_side=40),
                  elements=st.sampled_from([-1.5, 0.0, 2.0, 7.25, np.nan])),
       st.integers(0, 2), st.booleans())
def test_sort_property(a, d, desc):
    luabridge.require("torch")
    d = d % a.ndim
    vals, inds = bridge().call(luabridge.eval("function(x, d, s) return x:sort(d, s) end"), T(a), d + 1, desc)
    order = stable_order(a, d, desc)
    np.testing.assert_array_equal(N(inds), order + 1)
    np.testing.assert_array_equal(N(vals), np.take_along_axis(a, order, d))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_topk(m, rng, dtype):
    for a in layouts(rng, (6, 7, 35), dtype):
        for d in range(3):
            n = a.shape[d]
            for k in (1, 3, n):
                for largest in (False, True):
                    vals, inds = m["m"](T(a), "topk", k, d + 1, largest, True)
                    order = stable_order(a, d, largest).take(range(k), axis=d)
                    np.testing.assert_array_equal(N(inds), order + 1)
                    np.testing.assert_array_equal(N(vals), np.take_along_axis(a, order, d))
    # defaults: k = 1, the last dim, the smallest
    a = rng.standard_normal((3, 9))
    vals, inds = m["fn"]("topk", T(a))
    np.testing.assert_array_equal(N(vals), a.min(1, keepdims=True))
    vals, inds = m["fn"]("topk", T(a), 2, True)
    np.testing.assert_array_equal(N(vals), -np.sort(-a, 1)[:, :2])


@pytest.mark.parametrize("dtype", [np.float64, np.int32])
def test_kthvalue_median(m, rng, dtype):
    for a in layouts(rng, (5, 8, 33), dtype):
        for d in range(3):
            n = a.shape[d]
            order = stable_order(a, d, False)
            for k in (1, 2, n):
                vals, inds = m["m"](T(a), "kthvalue", k, d + 1)
                pick = order.take([k - 1], axis=d)
                np.testing.assert_array_equal(N(inds), pick + 1)
                np.testing.assert_array_equal(N(vals), np.take_along_axis(a, pick, d))
            vals, inds = m["m"](T(a), "median", d + 1)
            pick = order.take([(n - 1) // 2], axis=d)   # the lower middle for an even count
            np.testing.assert_array_equal(N(inds), pick + 1)
            np.testing.assert_array_equal(N(vals), np.take_along_axis(a, pick, d))
    # defaults: the last dim
    a = rng.standard_normal((4, 6))
    vals, _ = m["fn"]("median", T(a))
    np.testing.assert_array_equal(N(vals), np.sort(a, 1)[:, 2:3])
    np.testing.assert_array_equal(N(m["fn"]("kthvalue", T(np.array([3.0, 5, 4, 1, 1, 5])), 3)[0]), [3])


def mode_ref(a: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """The smallest most frequent value along axis and the 0-based position of its last occurrence."""
    moved = np.moveaxis(a, axis, -1)
    vals = np.empty(moved.shape[:-1], a.dtype)
    pos = np.empty(moved.shape[:-1], np.int64)
    for ix in np.ndindex(moved.shape[:-1]):
        row = moved[ix]
        uniq, counts = np.unique(row, return_counts=True)
        best = uniq[np.argmax(counts)]
        vals[ix], pos[ix] = best, np.nonzero(row == best)[0][-1]
    return np.expand_dims(vals, axis), np.expand_dims(pos, axis)


@pytest.mark.parametrize("dtype", [np.float64, np.uint8])
def test_mode(m, rng, dtype):
    for a in layouts(rng, (4, 5, 12), dtype):
        for d in range(3):
            vals, inds = m["m"](T(a), "mode", d + 1)
            want_v, want_p = mode_ref(a, d)
            np.testing.assert_array_equal(N(vals), want_v)
            np.testing.assert_array_equal(N(inds), want_p + 1)
    a = np.array([[1, 2, 2, 2, 3, 2], [1.5, 2, 2, 1.5, 1.5, 5]])
    vals, inds = m["fn"]("mode", T(a))
    np.testing.assert_array_equal(N(vals), [[2], [1.5]])
    np.testing.assert_array_equal(N(inds), [[6], [5]])


def test_zero_size(m):
    z = np.zeros((0, 4))
    vals, inds = m["m"](T(z), "sort", 1)
    assert N(vals).shape == (0, 4) and N(inds).shape == (0, 4)
    vals, inds = m["m"](T(z), "kthvalue", 1, 2)
    assert N(vals).shape == (0, 1)


def test_errors(m, rng):
    a = rng.standard_normal((3, 4))
    x = a.copy()
    with pytest.raises(luabridge.LuaError, match="sort: dimension 3 out of range of 2D tensor"):
        m["m"](T(x), "sort", 3)
    with pytest.raises(luabridge.LuaError, match="topk: k = 5 out of range for dimension 2 of size 4"):
        m["m"](T(x), "topk", 5)
    with pytest.raises(luabridge.LuaError, match="kthvalue: k = 0 out of range for dimension 1 of size 3"):
        m["m"](T(x), "kthvalue", 0, 1)
    with pytest.raises(luabridge.LuaError, match="median: dimension 1 has size 0"):
        m["m"](T(np.zeros((0, 2))), "median", 1)
    with pytest.raises(luabridge.LuaError, match="sort: the index result must be a torch.LongTensor"):
        m["fn"]("sort", T(x), T(np.zeros((3, 4), np.int32)), T(x))
    with pytest.raises(luabridge.LuaError, match="mode: expected torch.DoubleTensor, got torch.FloatTensor"):
        m["fn"]("mode", T(np.zeros(1, np.float32)), luabridge.eval("torch.LongTensor()"), T(x))
    with pytest.raises(luabridge.LuaError, match=r"sort: the tensor is empty \(no dimensions\)"):
        m["m"](luabridge.eval("torch.DoubleTensor()"), "sort")
    np.testing.assert_array_equal(x, a)
