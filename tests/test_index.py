"""Indexing (lua/torch/math/index.lua) and joining (join.lua: cat, split, chunk) against numpy.

torch7 conventions: indices are 1-based LongTensors, masks ByteTensors of 0/1 with the
operand's element count; every index and mask is validated before anything is written.
"""
import numpy as np
import pytest

import luabridge
from helpers import N, T, lua_fn


@pytest.fixture(scope="module")
def m(lua):
    """m(x, name, ...) = x:name(...); fn(name, ...) = torch.name(...); get/put: x[k] (= v)."""
    return {
        "m": lua_fn("function(x, op, ...) return x[op](x, ...) end"),
        "fn": lua_fn("function(op, ...) return torch[op](...) end"),
        "get": lua_fn("function(x, k) return x[k] end"),
        "put": lua_fn("function(x, k, v) x[k] = v end"),
    }


def strided(a: np.ndarray) -> np.ndarray:
    """A non-contiguous copy of a (every other element of a bigger array)."""
    big = np.zeros(tuple(2 * n for n in a.shape), a.dtype)
    view = big[tuple(slice(None, None, 2) for _ in a.shape)]
    view[...] = a
    return view


def layouts(a: np.ndarray):
    yield a.copy()
    yield strided(a)
    if a.ndim >= 2:
        yield np.ascontiguousarray(a.swapaxes(0, 1)).swapaxes(0, 1)


# --------------------------------------------------------------------------------------------
# masks

@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.uint8])
def test_masked_fill_select_copy(m, rng, dtype):
    a = (rng.standard_normal((4, 5, 3)) * 10).astype(dtype)
    mask = rng.integers(0, 2, a.shape).astype(np.uint8)
    for x in layouts(a):
        for mk in layouts(mask):
            np.testing.assert_array_equal(N(m["m"](T(x), "maskedSelect", T(mk))), a[mask == 1])
            np.testing.assert_array_equal(N(m["get"](T(x), T(mk))), a[mask == 1])
            y = x.copy() if x.flags.c_contiguous else strided(x)
            m["m"](T(y), "maskedFill", T(mk), 7)
            want = a.copy()
            want[mask == 1] = 7
            np.testing.assert_array_equal(y, want)
            src = (np.arange(100) + 1).astype(dtype)
            y = strided(a)
            m["m"](T(y), "maskedCopy", T(mk), T(src[::-1]))
            want = a.copy()
            want[mask == 1] = src[::-1][: mask.sum()]
            np.testing.assert_array_equal(y, want)
    # a mask of another shape with the same element count walks in row-major order
    flat = mask.reshape(-1)
    np.testing.assert_array_equal(N(m["m"](T(a), "maskedSelect", T(flat))), a.reshape(-1)[flat == 1])
    # res:maskedSelect(src, mask) writes res
    res = luabridge.eval("function(t) return t.new() end")(T(a))
    m["m"](res, "maskedSelect", T(a), T(mask))
    np.testing.assert_array_equal(N(res), a[mask == 1])


def test_masked_assign_through_indexing(m, rng):
    a = rng.standard_normal((3, 4))
    mask = (a > 0).astype(np.uint8)
    x = a.copy()
    m["put"](T(x), T(mask), -1)
    np.testing.assert_array_equal(x, np.where(a > 0, -1, a))
    x = a.copy()
    vals = np.arange(mask.sum(), dtype=float)
    m["put"](T(x), T(mask), T(vals))
    want = a.copy()
    want[a > 0] = vals
    np.testing.assert_array_equal(x, want)


def test_masked_zero_size(m):
    z = np.zeros((0, 3))
    assert N(m["m"](T(z), "maskedSelect", T(np.zeros((0, 3), np.uint8)))).shape == (0,)
    np.testing.assert_array_equal(N(m["m"](T(np.ones(3)), "maskedSelect", T(np.zeros(3, np.uint8)))), [])


def test_mask_errors_leave_tensor_unchanged(m, rng):
    a = rng.standard_normal((2, 3))
    x = a.copy()
    with pytest.raises(luabridge.LuaError, match="maskedFill: the mask can hold 0 and 1 only"):
        m["m"](T(x), "maskedFill", T(np.array([[1, 0, 2], [1, 1, 1]], np.uint8)), 5)
    with pytest.raises(luabridge.LuaError, match=r"maskedFill: inconsistent tensor size, 2x3 \(6 elements\) and 4"):
        m["m"](T(x), "maskedFill", T(np.ones(4, np.uint8)), 5)
    with pytest.raises(luabridge.LuaError, match="maskedCopy: the mask has 6 ones but the source only 5"):
        m["m"](T(x), "maskedCopy", T(np.ones((2, 3), np.uint8)), T(np.zeros(5)))
    with pytest.raises(luabridge.LuaError, match="maskedSelect: the mask must be a torch.ByteTensor"):
        m["m"](T(x), "maskedSelect", T(np.ones((2, 3), np.int32)))
    with pytest.raises(luabridge.LuaError, match="maskedCopy: expected torch.DoubleTensor, got torch.FloatTensor"):
        m["m"](T(x), "maskedCopy", T(np.ones((2, 3), np.uint8)), T(np.zeros(6, np.float32)))
    np.testing.assert_array_equal(x, a)


# --------------------------------------------------------------------------------------------
# index, indexCopy, indexAdd, indexFill

@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
@pytest.mark.parametrize("shape", [(9,), (6, 5), (4, 5, 6)])
def test_index_family(m, rng, dtype, shape):
    a = (rng.standard_normal(shape) * 10).astype(dtype)
    for d in range(len(shape)):
        n = shape[d]
        idx = rng.integers(0, n, 7)                     # repeats allowed
        perm = rng.permutation(n)[: max(1, n // 2)]     # distinct, for indexCopy
        for x in layouts(a):
            for ix in (idx, idx[::-1]):
                got = N(m["m"](T(x), "index", d + 1, T(ix + 1)))
                np.testing.assert_array_equal(got, np.take(a, ix, axis=d), err_msg=f"dim {d}")
            src_shape = list(shape)
            src_shape[d] = len(perm)
            src = (rng.standard_normal(src_shape) * 10).astype(dtype)
            y = strided(x)
            m["m"](T(y), "indexCopy", d + 1, T(perm + 1), T(src))
            want = a.copy()
            np.moveaxis(want, d, 0)[perm] = np.moveaxis(src, d, 0)
            np.testing.assert_array_equal(y, want)
            y = x.copy()
            m["m"](T(y), "indexCopy", d + 1, T(perm + 1), T(strided(src)))
            np.testing.assert_array_equal(y, want)
            y = strided(x)
            src_shape[d] = len(idx)
            add = (rng.standard_normal(src_shape) * 10).astype(dtype)
            m["m"](T(y), "indexAdd", d + 1, T(idx + 1), T(add))
            want = a.copy()
            np.add.at(np.moveaxis(want, d, 0), idx, np.moveaxis(add, d, 0))
            np.testing.assert_allclose(y, want, rtol=1e-5)
            y = x.copy()
            m["m"](T(y), "indexFill", d + 1, T(idx + 1), -3)
            want = a.copy()
            np.moveaxis(want, d, 0)[idx] = -3
            np.testing.assert_array_equal(y, want)



@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.uint8])
def test_index_add_and_fill_whole_rows(m, rng, dtype):
    """indexAdd and indexFill along dim 1 of contiguous tensors (one loop over whole rows, as
    LookupTable's backward uses it): repeated rows add up; a strided source takes the views."""
    a = rng.integers(0, 50, (7, 2, 3)).astype(dtype)
    idx = np.array([3, 0, 3, 6, 3])
    add = rng.integers(0, 5, (5, 2, 3)).astype(dtype)
    want = a.copy()
    np.add.at(want, idx, add)
    for src in (add, strided(add)):
        y = a.copy()
        m["m"](T(y), "indexAdd", 1, T(idx + 1), T(src))
        np.testing.assert_array_equal(y, want)
    y = a.copy()
    m["m"](T(y), "indexFill", 1, T(idx + 1), 9)
    want = a.copy()
    want[idx] = 9
    np.testing.assert_array_equal(y, want)

def test_index_result_forms_and_indexing_syntax(m, rng):
    a = rng.standard_normal((5, 3))
    idx = np.array([5, 1, 1])
    res = luabridge.eval("torch.DoubleTensor(9)")
    m["m"](res, "index", T(a), 1, T(idx))
    np.testing.assert_array_equal(N(res), a[idx - 1])
    np.testing.assert_array_equal(N(m["get"](T(a), T(idx))), a[idx - 1])
    x = a.copy()
    m["put"](T(x), T(np.array([2, 4])), T(np.zeros((2, 3))))
    want = a.copy()
    want[[1, 3]] = 0
    np.testing.assert_array_equal(x, want)
    x = a.copy()
    m["put"](T(x), T(np.array([3])), 8)
    want = a.copy()
    want[2] = 8
    np.testing.assert_array_equal(x, want)
    empty = np.zeros(0, np.int64)
    assert N(m["m"](T(a), "index", 2, T(empty))).shape == (5, 0)


def test_index_errors_leave_tensor_unchanged(m, rng):
    a = rng.standard_normal((4, 3))
    x = a.copy()
    with pytest.raises(luabridge.LuaError, match="index: index 5 out of range for dimension 1 of size 4"):
        m["m"](T(x), "index", 1, T(np.array([1, 5])))
    with pytest.raises(luabridge.LuaError, match="indexCopy: index 0 out of range for dimension 2 of size 3"):
        m["m"](T(x), "indexCopy", 2, T(np.array([1, 0])), T(np.ones((4, 2))))
    with pytest.raises(luabridge.LuaError, match="indexCopy: 3 indices but the source has size 2 in dimension 1"):
        m["m"](T(x), "indexCopy", 1, T(np.array([1, 2, 3])), T(np.ones((2, 3))))
    with pytest.raises(luabridge.LuaError, match="indexAdd: slices of the destination .4x3. and the source .2x4."):
        m["m"](T(x), "indexAdd", 1, T(np.array([1, 2])), T(np.ones((2, 4))))
    with pytest.raises(luabridge.LuaError, match="indexFill: the index must be a torch.LongTensor"):
        m["m"](T(x), "indexFill", 1, T(np.array([1], np.int32)), 0)
    with pytest.raises(luabridge.LuaError, match="index: the index must be a vector"):
        m["m"](T(x), "index", 1, T(np.ones((1, 1), np.int64)))
    with pytest.raises(luabridge.LuaError, match="indexFill: dimension 3 out of range"):
        m["m"](T(x), "indexFill", 3, T(np.array([1])), 0)
    np.testing.assert_array_equal(x, a)


# --------------------------------------------------------------------------------------------
# gather, scatter, nonzero

def take_along(a: np.ndarray, idx: np.ndarray, d: int) -> np.ndarray:
    return np.take_along_axis(a, idx, axis=d)


@pytest.mark.parametrize("dtype", [np.float64, np.int32])
def test_gather_scatter(m, rng, dtype):
    shape = (4, 5, 6)
    a = (rng.standard_normal(shape) * 10).astype(dtype)
    for d in range(3):
        ishape = list(shape)
        ishape[d] = 3
        idx = rng.integers(0, shape[d], ishape)
        for x in layouts(a):
            for ix in layouts(idx):
                got = N(m["fn"]("gather", T(x), d + 1, T(ix + 1)))
                np.testing.assert_array_equal(got, take_along(a, idx, d), err_msg=f"dim {d}")
        np.testing.assert_array_equal(N(m["m"](T(a), "gather", d + 1, T(idx + 1))), take_along(a, idx, d))
        # scatter with distinct positions along d (repeats would leave the winner unspecified)
        pos = np.argsort(rng.random(shape), axis=d).take(range(3), axis=d)
        src = (rng.standard_normal(ishape) * 10).astype(dtype)
        want = a.copy()
        np.put_along_axis(want, pos, src, axis=d)
        y = strided(a)
        m["m"](T(y), "scatter", d + 1, T(pos + 1), T(strided(src)))
        np.testing.assert_array_equal(y, want)
        want = a.copy()
        np.put_along_axis(want, pos, 9, axis=d)
        y = a.copy()
        m["fn"]("scatter", T(y), d + 1, T(pos + 1), 9)
        np.testing.assert_array_equal(y, want)


def test_gather_of_max_indices(m, rng):
    a = rng.standard_normal((3, 4, 5))
    vals, inds = m["m"](T(a), "max", 3)
    np.testing.assert_array_equal(N(m["fn"]("gather", T(a), 3, inds)), N(vals))


def test_gather_scatter_errors(m, rng):
    a = rng.standard_normal((3, 4))
    x = a.copy()
    with pytest.raises(luabridge.LuaError, match="gather: index 5 out of range for dimension 2 of size 4"):
        m["fn"]("gather", T(x), 2, T(np.array([[1], [5], [2]])))
    with pytest.raises(luabridge.LuaError, match="gather: the index .2x1. must match 3x4 in every dimension but 2"):
        m["fn"]("gather", T(x), 2, T(np.array([[1], [2]])))
    with pytest.raises(luabridge.LuaError, match="gather: the index must have 2 dimensions"):
        m["fn"]("gather", T(x), 1, T(np.array([1, 2])))
    with pytest.raises(luabridge.LuaError, match="scatter: index 4 out of range for dimension 1 of size 3"):
        m["m"](T(x), "scatter", 1, T(np.array([[1, 2, 3, 4]])), 0)
    with pytest.raises(luabridge.LuaError, match="scatter: the source .3x1. is smaller than the index .3x2."):
        m["m"](T(x), "scatter", 2, T(np.ones((3, 2), np.int64)), T(np.ones((3, 1))))
    np.testing.assert_array_equal(x, a)


@pytest.mark.parametrize("dtype", [np.uint8, np.int64, np.float32, np.float64])
@pytest.mark.parametrize("shape", [(12,), (12, 1), (1, 12), (6, 2), (3, 2, 2), (0, 3)])
def test_nonzero(m, rng, dtype, shape):
    a = rng.integers(0, 2, shape).astype(dtype)
    for x in layouts(a):
        got = N(m["m"](T(x), "nonzero"))
        want = np.argwhere(a) + 1
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got.reshape(want.shape), want)
        assert got.shape == (len(want), a.ndim)
    res = luabridge.eval("torch.LongTensor()")
    m["fn"]("nonzero", res, T(a))
    np.testing.assert_array_equal(N(res).reshape(-1, a.ndim), np.argwhere(a) + 1)



@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int16, np.int32, np.int64, np.float32, np.float64])
def test_nonzero_counts_any_value(m, rng, dtype):
    """Non-zeros of every value, not only 0 and 1 (the integer counts run without branches); runs
    of every length modulo 4, contiguous and strided."""
    info = np.iinfo(dtype) if np.issubdtype(dtype, np.integer) else None
    special = [info.min, info.max, 1, 2] if info else [np.nan, -0.0, np.inf, -1e-30]
    for n in range(0, 10):
        a = np.where(rng.random(n) < 0.5, 0, rng.choice(np.array(special, dtype=dtype), n)).astype(dtype)
        for x in layouts(a):
            got = N(m["m"](T(x), "nonzero"))
            np.testing.assert_array_equal(got.reshape(-1, 1), np.argwhere(a) + 1, err_msg=f"n={n}")


def test_masked_select_counts_long_masks(m, rng):
    """maskedSelect sizes its result by counting the mask's ones (long runs, odd lengths)."""
    for n in (1, 4, 1001, 4099):
        a = rng.standard_normal(n)
        mask = rng.integers(0, 2, n).astype(np.uint8)
        for mk in layouts(mask):
            np.testing.assert_array_equal(N(m["m"](T(a), "maskedSelect", T(mk))), a[mask == 1])


def test_function_forms(m, rng):
    """torch.index, torch.maskedSelect, torch.gather, torch.nonzero: as the methods."""
    a = rng.standard_normal((4, 3))
    idx = np.array([4, 2, 2])
    np.testing.assert_array_equal(N(m["fn"]("index", T(a), 1, T(idx))), a[idx - 1])
    res = luabridge.eval("torch.DoubleTensor()")
    m["fn"]("index", res, T(a), 2, T(np.array([3, 1])))
    np.testing.assert_array_equal(N(res), a[:, [2, 0]])
    mask = (a > 0).astype(np.uint8)
    np.testing.assert_array_equal(N(m["fn"]("maskedSelect", T(a), T(mask))), a[a > 0])
    np.testing.assert_array_equal(N(m["fn"]("nonzero", T(mask))), np.argwhere(mask) + 1)


# --------------------------------------------------------------------------------------------
# cat, split, chunk

def test_cat(m, rng):
    for d in range(3):
        parts = []
        for n in (2, 3, 1):
            s = [4, 5, 6]
            s[d] = n
            parts.append(rng.standard_normal(s))
        want = np.concatenate(parts, axis=d)
        got = N(m["fn"]("cat", T(parts[0]), T(strided(parts[1])), d + 1))
        np.testing.assert_array_equal(got, np.concatenate(parts[:2], axis=d))
        lst = luabridge.runtime().table_from([T(p) for p in (parts[0], strided(parts[1]), parts[2])])
        np.testing.assert_array_equal(N(m["fn"]("cat", lst, d + 1)), want)
        res = np.zeros(want.shape)
        m["fn"]("cat", T(res), lst, d + 1)
        np.testing.assert_array_equal(res, want)
    # default dim: the last; empty tensors are skipped; vectors along dim 2 become columns
    a, b = rng.standard_normal((2, 3)), rng.standard_normal((2, 4))
    np.testing.assert_array_equal(N(m["fn"]("cat", T(a), T(b))), np.concatenate([a, b], 1))
    empty = luabridge.eval("torch.DoubleTensor()")
    np.testing.assert_array_equal(N(m["fn"]("cat", empty, T(a), 1)), a)
    assert luabridge.eval("torch.cat(torch.DoubleTensor(), torch.DoubleTensor()):dim()") == 0
    u, v = np.arange(3.0), np.arange(3.0) + 10
    np.testing.assert_array_equal(N(m["fn"]("cat", T(u), T(v), 2)), np.stack([u, v], 1))
    np.testing.assert_array_equal(N(m["m"](T(u), "cat", T(v))), np.concatenate([u, v]))


def test_cat_errors(m):
    a = T(np.ones((2, 3)))
    with pytest.raises(luabridge.LuaError, match="cat: inconsistent tensor sizes 2x3 and 3x4 in dimension 2"):
        m["fn"]("cat", a, T(np.ones((3, 4))), 1)
    with pytest.raises(luabridge.LuaError, match="cat: expected a non-empty list of tensors"):
        m["fn"]("cat", luabridge.runtime().table_from([]))
    with pytest.raises(luabridge.LuaError, match="cat: expected torch.DoubleTensor, got torch.FloatTensor"):
        m["fn"]("cat", a, T(np.ones((2, 3), np.float32)))
    with pytest.raises(luabridge.LuaError, match="cat: invalid dimension 0"):
        m["fn"]("cat", a, a, 0)


def test_split_chunk(m, rng):
    a = rng.standard_normal((7, 4))
    parts = m["m"](T(a), "split", 3)
    got = [N(parts[i]) for i in range(1, len(parts) + 1)]
    for g, w in zip(got, [a[0:3], a[3:6], a[6:7]], strict=True):
        np.testing.assert_array_equal(g, w)
    chunks = m["fn"]("chunk", T(a), 3, 2)
    got = [N(chunks[i]) for i in range(1, len(chunks) + 1)]
    for g, w in zip(got, [a[:, 0:2], a[:, 2:4]], strict=True):
        np.testing.assert_array_equal(g, w)
    # split views share memory
    x = a.copy()
    luabridge.eval("function(t) t:split(2)[2]:fill(0) end")(T(x))
    assert (x[2:4] == 0).all() and (x[:2] == a[:2]).all()
    with pytest.raises(luabridge.LuaError, match="split: size must be a positive integer, got 0"):
        m["m"](T(a), "split", 0)
    with pytest.raises(luabridge.LuaError, match="chunk: dimension 3 out of range"):
        m["m"](T(a), "chunk", 2, 3)
