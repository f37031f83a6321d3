"""Reductions (lua/torch/math/reduce.lua, backend/cpu/reduce.lua) and histograms, against numpy
float64 references.

torch7 conventions checked here: a reduction along dim keeps that dim with size 1; max/min
return the first extreme's 1-based index, and a NaN wins (the first one); integer tensors
accumulate in int64 and wrap when stored; std/var divide by n - 1 unless the flag says biased.
Most tests run twice (the `reduce_path` fixture): on the LuaJIT loops only, where Float sums
accumulate in double as torch7's accreal, and on numpy's loops from one element on, where they
add up float32 blocks (summed pairwise) in double.
"""
import numpy as np
import pytest

import luabridge
from helpers import N, T, lua_fn


def views(rng: np.random.Generator, shape: tuple, dtype, low: float = -5, high: float = 5):
    """(name, array) pairs: contiguous and non-contiguous views with the given shape."""
    def draw(s):
        a = rng.uniform(low, high, size=s)
        return (np.round(a) if np.dtype(dtype).kind in "iu" else a).astype(dtype)
    big = draw(tuple(2 * n + 1 for n in shape))
    yield "contiguous", draw(shape)
    yield "strided", big[tuple(slice(1, None, 2) for _ in shape)]
    yield "transposed", np.ascontiguousarray(draw(shape[::-1])).T
    yield "reversed", draw(shape)[::-1]


FLOATS = [np.float32, np.float64]
NUMERIC = FLOATS + [np.uint8, np.int32, np.int64]
SHAPES = [(7,), (5, 40), (3, 4, 33), (1, 6, 1), (3, 40, 20)]


def tol(dtype) -> dict:
    return dict(rtol=2e-5, atol=1e-4) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-10)


def sum_tol(a: np.ndarray) -> dict:
    """pytest.approx's bounds for a whole sum of a: for float32, 1e-7 of the sum of magnitudes
    (pairwise float32 blocks err about 1e-9 of it on random data, a float32 running sum about
    1e-6 past a million elements)."""
    if a.dtype == np.float32:
        return dict(rel=0, abs=1e-7 * np.abs(a.astype(np.float64)).sum())
    return dict(rel=1e-9, abs=1e-9)


@pytest.fixture(scope="module")
def f(lua):
    return {
        "whole": lua_fn("function(x, op, ...) return x[op](x, ...) end"),
        "fn": lua_fn("function(op, ...) return torch[op](...) end"),
    }


@pytest.fixture(params=["lua", "numpy"])
def reduce_path(request, lua):
    """Runs a test on the LuaJIT loops only, then with numpy's loops for runs of any length."""
    reduce = lua.eval("package.loaded['torch.backend.cpu.reduce']")
    saved = reduce.NUMPY_FROM
    reduce.NUMPY_FROM = 1e18 if request.param == "lua" else 1
    yield request.param
    reduce.NUMPY_FROM = saved


# --------------------------------------------------------------------------------------------
# whole-tensor reductions -> numbers

@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("shape", SHAPES)
def test_whole_sum_max_min(f, reduce_path, rng, dtype, shape):
    for name, a in views(rng, shape, dtype, 0, 9):
        t = T(a)
        ref = a.astype(np.float64)
        assert f["whole"](t, "sum") == pytest.approx(ref.sum(), rel=1e-6), name
        assert f["whole"](t, "max") == ref.max(), name
        assert f["whole"](t, "min") == ref.min(), name
        assert f["fn"]("sum", t) == pytest.approx(ref.sum(), rel=1e-6)


def test_whole_prod_and_integer_accumulation(f, reduce_path, rng):
    a = rng.uniform(0.5, 1.5, size=(6, 7))
    assert f["whole"](T(a), "prod") == pytest.approx(np.prod(a), rel=1e-12)
    b = np.full(1000, 255, dtype=np.uint8)  # sums past the element type's range (int64 accreal)
    assert f["whole"](T(b), "sum") == 255000
    c = np.array([2**40, 2**40 + 3], dtype=np.int64)
    assert f["whole"](T(c), "sum") == 2**41 + 3
    assert f["whole"](T(c), "max") == 2**40 + 3


@pytest.mark.parametrize("n", [1, 3, 4, 5, 1000, 100_003])
@pytest.mark.parametrize("dtype", FLOATS)
def test_sum_and_max_lengths(f, reduce_path, rng, n, dtype):
    a = rng.standard_normal(n).astype(dtype)
    t = T(a)
    assert f["whole"](t, "sum") == pytest.approx(a.astype(np.float64).sum(), **sum_tol(a))
    assert f["whole"](t, "max") == a.max()
    assert f["whole"](t, "min") == a.min()


@pytest.mark.parametrize("where", [0, 1, 57, 99])
def test_whole_max_min_nan(f, reduce_path, rng, where):
    a = rng.standard_normal(100)
    a[where] = np.nan
    t = T(a)
    assert np.isnan(f["whole"](t, "max")) and np.isnan(f["whole"](t, "min"))
    a[where] = np.inf  # an infinity is a value, not a NaN
    assert f["whole"](t, "max") == np.inf and f["whole"](t, "min") == a.min()


@pytest.mark.parametrize("dtype", FLOATS)
def test_whole_mean_std_var_norm(f, reduce_path, rng, dtype):
    for name, a in views(rng, (6, 9), dtype):
        t = T(a)
        ref = a.astype(np.float64)
        assert f["whole"](t, "mean") * a.size == pytest.approx(ref.sum(), **sum_tol(a)), name
        assert f["whole"](t, "var") == pytest.approx(ref.var(ddof=1), rel=1e-6), name
        assert f["whole"](t, "var", True) == pytest.approx(ref.var(), rel=1e-6), name
        assert f["whole"](t, "std") == pytest.approx(ref.std(ddof=1), rel=1e-6), name
        assert f["whole"](t, "std", True) == pytest.approx(ref.std(), rel=1e-6), name
        assert f["whole"](t, "norm") == pytest.approx(np.sqrt((ref ** 2).sum()), rel=1e-6)
        assert f["whole"](t, "norm", 1) == pytest.approx(np.abs(ref).sum(), rel=1e-6)
        assert f["whole"](t, "norm", 3) == pytest.approx((np.abs(ref) ** 3).sum() ** (1 / 3), rel=1e-6)
        assert f["whole"](t, "norm", 0) == np.count_nonzero(ref)


def test_dist(f, rng):
    a, b = rng.standard_normal((4, 5)), rng.standard_normal((5, 4)).T
    ta, tb = T(a), T(b)
    assert f["fn"]("dist", ta, tb) == pytest.approx(np.sqrt(((a - b) ** 2).sum()), rel=1e-12)
    assert f["fn"]("dist", ta, tb, 3) == pytest.approx((np.abs(a - b) ** 3).sum() ** (1 / 3), rel=1e-12)
    assert f["whole"](ta, "dist", tb, 1) == pytest.approx(np.abs(a - b).sum(), rel=1e-12)


@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("shape", [(4, 4), (3, 7), (7, 3), (0, 3)])
def test_trace(f, rng, dtype, shape):
    for name, a in views(rng, shape, dtype):
        ref = np.trace(a.astype(np.float64 if a.dtype.kind == "f" else np.int64))
        assert f["fn"]("trace", T(a)) == pytest.approx(ref, rel=1e-6), name
        assert f["whole"](T(a), "trace") == pytest.approx(ref, rel=1e-6), name


def test_all_any_equal(f, rng):
    ones, mixed = np.ones(7, np.uint8), np.array([0, 1, 0], np.uint8)
    assert f["whole"](T(ones), "all") is True
    assert f["whole"](T(mixed), "all") is False
    assert f["whole"](T(mixed), "any") is True
    assert f["whole"](T(np.zeros(3, np.uint8)), "any") is False
    a = rng.standard_normal((3, 4))
    same = lambda x, y: f["fn"]("equal", T(x), T(y))  # noqa: E731
    assert same(a, np.ascontiguousarray(a.T).T) is True
    b = a.copy()
    b[2, 3] += 1
    assert same(a, b) is False
    assert same(a, a[:2]) is False
    assert same(a.reshape(4, 3), a.reshape(4, 3)) is True
    assert same(np.array([np.nan]), np.array([np.nan])) is False


def test_empty_and_zero_size(f, reduce_path):
    empty = luabridge.eval("torch.DoubleTensor()")
    assert f["whole"](empty, "sum") == 0
    assert f["whole"](empty, "prod") == 1
    z = T(np.zeros((0, 3)))
    assert f["whole"](z, "sum") == 0
    np.testing.assert_array_equal(N(f["whole"](z, "sum", 1)), np.zeros((1, 3)))
    np.testing.assert_array_equal(N(f["whole"](z, "prod", 1)), np.ones((1, 3)))
    assert N(f["whole"](z, "sum", 2)).shape == (0, 1)
    np.testing.assert_array_equal(N(f["whole"](z, "cumsum", 1)), np.zeros((0, 3)))
    with pytest.raises(luabridge.LuaError, match="max: the tensor has no elements"):
        f["whole"](z, "max")
    with pytest.raises(luabridge.LuaError, match="min: cannot reduce dimension 1 of size 0"):
        f["whole"](z, "min", 1)


# --------------------------------------------------------------------------------------------
# along a dimension -> tensors keeping the dim

@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("shape", SHAPES)
def test_sum_prod_along_dim(f, reduce_path, rng, dtype, shape):
    for name, a in views(rng, shape, dtype, 0, 3):
        t = T(a)
        for d in range(len(shape)):
            for op, ref in (("sum", np.sum), ("prod", np.prod)):
                got = N(f["whole"](t, op, d + 1))
                acc = np.int64 if np.dtype(dtype).kind in "iu" else np.float64
                want = ref(a.astype(acc), axis=d, keepdims=True).astype(dtype)  # integers wrap
                assert got.dtype == dtype and got.shape == want.shape, (name, op, d)
                np.testing.assert_allclose(got, want, **tol(dtype), err_msg=f"{name} {op} {d}")


def test_short_folds_in_order(f, rng, reduce_path):
    # torch7 folds in order, and its own tests compare small sums and products along a dim exactly
    y = rng.uniform(0, 1, (5, 5, 5))
    for d in range(3):
        for op, ufunc in (("sum", np.add), ("prod", np.multiply)):
            want = np.take(y, [0], axis=d)
            for j in range(1, 5):
                want = ufunc(want, np.take(y, [j], axis=d))
            np.testing.assert_array_equal(N(f["whole"](T(y), op, d + 1)), want, err_msg=f"{op} {d}")


@pytest.mark.parametrize("dtype", FLOATS)
def test_lua_float_sums_accumulate_in_double(f, dtype, reduce_path):
    if reduce_path == "numpy":
        pytest.skip("numpy's float32 loop adds in float32 within a block")
    # 1 + 2^-24 * n: any float32 addition would lose the small terms entirely
    a = np.full((3, 4096), 2.0 ** -24, dtype=dtype)
    a[:, 0] = 1
    for arr in (a, np.ascontiguousarray(a.T).T):
        got = N(f["whole"](T(arr), "sum", 2))
        np.testing.assert_array_equal(got, np.full((3, 1), 1 + 4095 * 2.0 ** -24).astype(dtype))
        assert f["whole"](T(arr), "sum") == 3 * (1 + 4095 * 2.0 ** -24)


def test_float32_blocks_add_up_in_double(f, reduce_path):
    # elements 1 + 2^-11: the sums of 4096 of them are exact in float32, but not the running sums
    # past 2^13 elements, so a float32 accumulation across blocks would round
    x = np.float32(1 + 2.0 ** -11)
    rows = np.full((2, 65536), x)
    want = 65536 * (1 + 2.0 ** -11)   # 65568, exact in float32 too
    for arr in (rows, np.ascontiguousarray(rows.T).T, np.full((2, 2 * 65536), x)[:, ::2]):
        np.testing.assert_array_equal(N(f["whole"](T(arr), "sum", 2)), [[want], [want]])
        assert f["whole"](T(arr), "sum") == 2 * want
    # along an outer dim: slabs of 16384 rows
    cols = np.full((16384, 4), x)
    np.testing.assert_array_equal(N(f["whole"](T(cols), "sum", 1)), np.full((1, 4), 16384 * (1 + 2.0 ** -11)))


def test_float32_sum_accuracy(f, rng, reduce_path):
    a = rng.uniform(0, 1, 10**6).astype(np.float32)
    assert f["whole"](T(a), "sum") == pytest.approx(a.astype(np.float64).sum(), **sum_tol(a))
    m = a.reshape(1000, 1000)
    for d in (0, 1):
        want = m.astype(np.float64).sum(axis=d, keepdims=True)
        np.testing.assert_allclose(N(f["whole"](T(m), "sum", d + 1)), want, rtol=1e-6)


@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("shape", SHAPES + [(4, 100)])
def test_max_min_along_dim(f, reduce_path, rng, dtype, shape):
    for name, a in views(rng, shape, dtype, 0, 4):  # few distinct values: many ties
        t = T(a)
        for d in range(len(shape)):
            for op, val, arg in (("max", np.max, np.argmax), ("min", np.min, np.argmin)):
                v, i = f["whole"](t, op, d + 1)
                np.testing.assert_array_equal(N(v), val(a, axis=d, keepdims=True), err_msg=name)
                # the first extreme, 1-based
                np.testing.assert_array_equal(N(i), np.expand_dims(arg(a, axis=d), d) + 1,
                                              err_msg=f"{name} {op} dim {d}")
                assert N(i).dtype == np.int64


@pytest.mark.parametrize("n", [5, 100])
def test_max_along_dim_nan(f, reduce_path, rng, n):
    a = rng.standard_normal((3, n))
    a[0, 2], a[0, 4] = np.nan, np.nan
    a[2, n - 1] = np.nan
    for arr, d in ((a, 2), (np.ascontiguousarray(a.T), 1)):
        v, i = f["whole"](T(arr), "max", d)
        v, i = N(v).ravel(), N(i).ravel()
        assert np.isnan(v[0]) and i[0] == 3  # the first NaN
        assert v[1] == a[1].max() and i[1] == a[1].argmax() + 1
        assert np.isnan(v[2]) and i[2] == n


@pytest.mark.parametrize("dtype", FLOATS)
def test_max_min_long_rows(f, reduce_path, rng, dtype):
    # rows longer than the 4096-element chunks in which numpy's path looks for the first extreme
    a = rng.standard_normal((3, 9999)).astype(dtype)
    a[0, [5000, 9000]] = np.nan     # the first NaN wins
    a[1, [7000, 7001]] = 10         # of equal extremes, the first
    a[1, [8000, 8500]] = -10
    a[2, 0] = np.nan
    assert np.isnan(f["whole"](T(a), "max")) and np.isnan(f["whole"](T(a), "min"))
    assert f["whole"](T(a[1]), "max") == 10 and f["whole"](T(a[1]), "min") == -10
    for arr, d in ((a, 2), (np.ascontiguousarray(a.T), 1), (np.ascontiguousarray(a.T).T, 2)):
        for op, extreme, at in (("max", 10, 7001), ("min", -10, 8001)):
            v, i = f["whole"](T(arr), op, d)
            v, i = N(v).ravel(), N(i).ravel()
            assert np.isnan(v[0]) and i[0] == 5001, (op, d)
            assert v[1] == extreme and i[1] == at, (op, d)
            assert np.isnan(v[2]) and i[2] == 1, (op, d)


def test_unaligned_elements(f, reduce_path, rng):
    # numpy's loops need elements at multiples of their size: these take the LuaJIT loops
    a = np.zeros(8 * 600 + 1, np.uint8)[1:].view(np.float64).reshape(20, 30)
    assert not a.flags.aligned
    a[...] = rng.standard_normal((20, 30))
    t = T(a)
    assert f["whole"](t, "sum") == pytest.approx(a.sum(), rel=1e-12)
    assert f["whole"](t, "max") == a.max() and f["whole"](t, "min") == a.min()
    for d in (0, 1):
        np.testing.assert_allclose(N(f["whole"](t, "sum", d + 1)), a.sum(axis=d, keepdims=True), rtol=1e-12)
        v, i = f["whole"](t, "max", d + 1)
        np.testing.assert_array_equal(N(v), a.max(axis=d, keepdims=True))
        np.testing.assert_array_equal(N(i), np.expand_dims(a.argmax(axis=d), d) + 1)


@pytest.mark.parametrize("dtype", FLOATS)
def test_mean_std_var_norm_along_dim(f, reduce_path, rng, dtype):
    for name, a in views(rng, (4, 5, 37), dtype):
        t = T(a)
        ref = a.astype(np.float64)
        for d in range(3):
            check = lambda got, want: np.testing.assert_allclose(  # noqa: E731
                N(got), want.astype(dtype), rtol=1e-5, atol=1e-5, err_msg=f"{name} dim {d}")
            check(f["whole"](t, "mean", d + 1), ref.mean(axis=d, keepdims=True))
            check(f["whole"](t, "var", d + 1), ref.var(axis=d, ddof=1, keepdims=True))
            check(f["whole"](t, "var", d + 1, True), ref.var(axis=d, keepdims=True))
            check(f["whole"](t, "std", d + 1), ref.std(axis=d, ddof=1, keepdims=True))
            check(f["whole"](t, "std", d + 1, False), ref.std(axis=d, ddof=1, keepdims=True))
            for p in (0, 1, 2, 3.5):
                want = (np.count_nonzero(ref, axis=d, keepdims=True) if p == 0 else
                        (np.abs(ref) ** p).sum(axis=d, keepdims=True) ** (1 / p))
                check(f["whole"](t, "norm", p, d + 1), want)


def test_var_of_one_element_is_nan(f):
    assert np.isnan(f["whole"](T(np.array([3.0])), "var"))
    t = T(np.array([[3.0, 4.0]]))
    assert np.isnan(N(f["whole"](t, "std", 1))).all()
    np.testing.assert_array_equal(N(f["whole"](t, "var", 1, True)), [[0, 0]])


@pytest.mark.parametrize("dtype", NUMERIC)
def test_cumsum_cumprod(f, rng, dtype):
    for name, a in views(rng, (4, 6, 70), dtype, 1, 2):
        t = T(a)
        acc = np.int64 if np.dtype(dtype).kind in "iu" else np.float64
        for d in range(3):
            for op, ref in (("cumsum", np.cumsum), ("cumprod", np.cumprod)):
                want = ref(a.astype(acc), axis=d).astype(dtype)
                got = N(f["whole"](t, op, d + 1))
                np.testing.assert_allclose(got, want, **tol(dtype), err_msg=f"{name} {op} {d}")
        # default dim is 1, as torch7
        np.testing.assert_allclose(N(f["whole"](t, "cumsum")), np.cumsum(a.astype(acc), 0).astype(dtype),
                                   **tol(dtype))


def test_result_forms(f, reduce_path, rng):
    a = rng.standard_normal((5, 6))
    t = T(a)
    res = luabridge.eval("torch.DoubleTensor(7, 7)")
    out = f["fn"]("sum", res, t, 2)
    assert luabridge.eval("function(a, b) return a == b end")(out, res)
    np.testing.assert_allclose(N(res), a.sum(1, keepdims=True))
    vals, inds = luabridge.eval("torch.DoubleTensor()"), luabridge.eval("torch.LongTensor()")
    f["fn"]("min", vals, inds, t, 1)
    np.testing.assert_array_equal(N(vals), a.min(0, keepdims=True))
    np.testing.assert_array_equal(N(inds), a.argmin(0)[None] + 1)
    # a preallocated result with the reduced shape, seen by numpy, is written in place
    arr = np.zeros((1, 6))
    f["fn"]("prod", T(arr), t, 1)
    np.testing.assert_allclose(arr, a.prod(0, keepdims=True))
    cum = np.zeros((5, 6))
    f["fn"]("cumsum", T(cum), t, 2)
    np.testing.assert_allclose(cum, np.cumsum(a, 1))


def test_renorm(f, rng):
    for p in (1, 2, 3):
        a = rng.standard_normal((4, 5, 6))
        for d in range(3):
            moved = np.moveaxis(a, d, 0).reshape(a.shape[d], -1)
            norms = (np.abs(moved) ** p).sum(1) ** (1 / p)
            maxnorm = float(np.median(norms))
            scale = np.where(norms > maxnorm, maxnorm / (norms + 1e-7), 1.0)
            want = np.moveaxis(moved * scale[:, None], 0, 0).reshape(np.moveaxis(a, d, 0).shape)
            want = np.moveaxis(want, 0, d)
            got = N(f["fn"]("renorm", T(a), p, d + 1, maxnorm))
            np.testing.assert_allclose(got, want, rtol=1e-12, err_msg=f"p {p} dim {d}")
            inplace = a.copy()
            f["whole"](T(inplace), "renorm", p, d + 1, maxnorm)
            np.testing.assert_allclose(inplace, want, rtol=1e-12)


def test_histc(f, rng):
    # torch7's rule: bin = floor((v - min) / (max - min) * nbins), the max going to the last bin
    def ref(a, nbins, lo, hi):
        a = a.ravel()
        inside = a[(a >= lo) & (a <= hi)]
        bins = np.minimum(np.floor((inside - lo) / (hi - lo) * nbins).astype(int), nbins - 1)
        return np.bincount(bins, minlength=nbins).astype(float)
    x = np.array([2, 4, 2, 2, 5, 4], float)
    np.testing.assert_array_equal(N(f["fn"]("histc", T(x), 5, 1, 5)), [0, 3, 0, 2, 1])
    a = rng.standard_normal((30, 40))[::2, 1::3]
    t = T(a)
    np.testing.assert_array_equal(N(f["fn"]("histc", t, 7, -1, 1.5)), ref(a, 7, -1, 1.5))
    np.testing.assert_array_equal(N(f["fn"]("histc", t)), ref(a, 100, a.min(), a.max()))
    const = T(np.full(4, 3.0))  # min = max = 3: the range becomes [2, 4]
    np.testing.assert_array_equal(N(f["fn"]("histc", const, 4)), [0, 0, 4, 0])


def test_bhistc(f, rng):
    x = np.array([[2, 4, 2, 2, 5, 4], [3, 5, 1, 5, 3, 5], [3, 4, 2, 5, 5, 1]], float)
    want = [[0, 3, 0, 2, 1], [1, 0, 2, 0, 3], [1, 1, 1, 1, 2]]
    np.testing.assert_array_equal(N(f["fn"]("bhistc", T(x), 5, 1, 5)), want)
    a = rng.uniform(0, 1, (6, 50)).astype(np.float32).T.copy().T  # non-contiguous rows
    got = N(f["fn"]("bhistc", T(a), 10, 0, 1))
    for row, counts in zip(a, got):
        np.testing.assert_array_equal(counts, np.histogram(row.astype(np.float64), 10, (0, 1))[0])


# --------------------------------------------------------------------------------------------
# errors: checked before anything is written

def test_errors(f):
    t = T(np.arange(6.0).reshape(2, 3))
    with pytest.raises(luabridge.LuaError, match="sum: dimension 3 out of range of 2D tensor"):
        f["whole"](t, "sum", 3)
    with pytest.raises(luabridge.LuaError, match="max: expected torch.DoubleTensor, got torch.FloatTensor"):
        f["fn"]("max", luabridge.eval("torch.FloatTensor()"), t, 1)
    with pytest.raises(luabridge.LuaError, match="min: the index result must be a torch.LongTensor"):
        f["fn"]("min", luabridge.eval("torch.DoubleTensor()"), luabridge.eval("torch.IntTensor()"), t, 1)
    with pytest.raises(luabridge.LuaError, match="max: a result tensor was given but no dimension"):
        f["fn"]("max", t, t)
    long = T(np.arange(4))
    with pytest.raises(luabridge.LuaError, match="mean: expected a torch.FloatTensor or torch.DoubleTensor"):
        f["whole"](long, "mean")
    with pytest.raises(luabridge.LuaError, match="all: expected a torch.ByteTensor"):
        f["whole"](long, "all")
    with pytest.raises(luabridge.LuaError, match=r"dist: inconsistent tensor size, 2x3 \(6 elements\) and 4"):
        f["fn"]("dist", t, T(np.zeros(4)))
    with pytest.raises(luabridge.LuaError, match="renorm: expected at least 2 dimensions"):
        f["fn"]("renorm", T(np.ones(3)), 2, 1, 1)
    with pytest.raises(luabridge.LuaError, match="renorm: the norm must be positive"):
        f["fn"]("renorm", t, 0, 1, 1)
    with pytest.raises(luabridge.LuaError, match="trace: expected a 2D tensor, got 1D"):
        f["fn"]("trace", T(np.ones(3)))
    with pytest.raises(luabridge.LuaError, match="bhistc: expected a 2D tensor"):
        f["fn"]("bhistc", T(np.ones(3)))
    with pytest.raises(luabridge.LuaError, match="histc: the number of bins must be a positive integer"):
        f["fn"]("histc", t, 0)
    with pytest.raises(luabridge.LuaError, match="sum: not available for torch.HalfTensor"):
        f["whole"](luabridge.eval("torch.HalfTensor(3)"), "sum")
    with pytest.raises(luabridge.LuaError, match="sum: expected a tensor, got string"):
        f["fn"]("sum", "x")
    res = np.full((1, 3), 7.0)
    with pytest.raises(luabridge.LuaError, match="prod: dimension 0 out of range"):
        f["fn"]("prod", T(res), t, 0)
    np.testing.assert_array_equal(res, 7.0)  # untouched by the failed call
