"""Matrix products (lua/torch/math/blas.lua), against numpy float64 references.

Float/Double go through numpy's BLAS library via the FFI (or numpy itself when no library is
found: LUABRIDGE_BLAS=numpy); the integer types through Lua loops. Operands come in every
layout BLAS must cope with: contiguous, transposed, strided in both dims (copied), reversed
(negative strides) and expanded (zero strides).
"""
import gc
import os
import threading

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import luabridge
from helpers import LAYOUTS, N, T, assert_lua_error, call, draw, in_fresh_thread, layout, lua_fn, method, tol

FLOATS = [np.float64, np.float32]
TYPES = FLOATS + [np.int32, np.int64]
expanded = lua_fn("function(t, n) return t:expand(t:size(1), n) end")


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("la", LAYOUTS)
@pytest.mark.parametrize("lb", LAYOUTS)
def test_mm_layouts(rng, dtype, la, lb):
    a, b = draw(rng, (5, 7), dtype), draw(rng, (7, 3), dtype)
    got = N(call("mm", T(layout(a, la)), T(layout(b, lb))))
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, **tol(dtype))
    assert got.dtype == dtype


@settings(max_examples=40, deadline=None)
@given(m=st.integers(1, 9), n=st.integers(1, 9), k=st.integers(1, 9), la=st.sampled_from(LAYOUTS),
       lb=st.sampled_from(LAYOUTS), lr=st.sampled_from(LAYOUTS), seed=st.integers(0, 2**31))
def test_addmm_shapes_into_result_layouts(lua, m, n, k, la, lb, lr, seed):
    """Sizes of 1 and every layout of the result too (written in place, other memory untouched)."""
    rng = np.random.default_rng(seed)
    a, b, t = draw(rng, (m, k), np.float64), draw(rng, (k, n), np.float64), draw(rng, (m, n), np.float64)
    big = np.full((3 * m + 1, 3 * n + 1), 7.0)
    r = {"contiguous": np.zeros((m, n)), "transposed": np.zeros((n, m)).T,
         "strided": big[1::3, 1::3], "reversed": np.zeros((m, n))[::-1, ::-1]}[lr]
    out = call("addmm", T(r), 0.5, T(t), -2.0, T(layout(a, la)), T(layout(b, lb)))
    np.testing.assert_allclose(N(out), 0.5 * t - 2 * a @ b, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(r, 0.5 * t - 2 * a @ b, rtol=1e-12, atol=1e-12)
    big[1::3, 1::3] = 7.0
    assert (big == 7.0).all()


@pytest.mark.parametrize("dtype", TYPES)
def test_mm_zero_stride_operand(rng, dtype):
    a = draw(rng, (6, 4), dtype)
    col = draw(rng, (4, 1), dtype)
    got = N(call("mm", T(a), expanded(T(col), 5)))
    np.testing.assert_allclose(got, a.astype(np.float64) @ np.repeat(col, 5, axis=1), **tol(dtype))


@pytest.mark.parametrize("dtype", TYPES)
def test_addmm_forms(rng, dtype):
    a, b, m = draw(rng, (4, 3), dtype), draw(rng, (3, 5), dtype), draw(rng, (4, 5), dtype)
    ref = a.astype(np.float64) @ b
    np.testing.assert_allclose(N(call("addmm", T(m), T(a), T(b))), m + ref, **tol(dtype))
    np.testing.assert_allclose(N(call("addmm", 2, T(m), 3, T(a), T(b))), 2 * m + 3 * ref, **tol(dtype))
    np.testing.assert_allclose(N(call("addmm", T(m), 3, T(a), T(b))), m + 3 * ref, **tol(dtype))
    np.testing.assert_allclose(N(call("addmm", 2, T(m), T(a), T(b))), 2 * m + ref, **tol(dtype))
    r = np.zeros((4, 5), dtype)
    assert N(call("addmm", T(r), 2, T(m), 3, T(a), T(b))) is not None
    np.testing.assert_allclose(r, 2 * m + 3 * ref, **tol(dtype))
    # methods: self is the result, t defaults to self
    r = m.copy()
    method("addmm", T(r), T(a), T(b))
    np.testing.assert_allclose(r, m + ref, **tol(dtype))
    r = m.copy()
    method("addmm", T(r), 3, T(a), T(b))
    np.testing.assert_allclose(r, m + 3 * ref, **tol(dtype))
    r = m.copy()
    method("addmm", T(r), 2, 3, T(a), T(b))
    np.testing.assert_allclose(r, 2 * m + 3 * ref, **tol(dtype))
    r = np.zeros((4, 5), dtype)
    method("addmm", T(r), 2, T(m), 3, T(a), T(b))
    np.testing.assert_allclose(r, 2 * m + 3 * ref, **tol(dtype))
    r = np.zeros((4, 5), dtype)
    method("addmm", T(r), T(m), 3, T(a), T(b))
    np.testing.assert_allclose(r, m + 3 * ref, **tol(dtype))


@pytest.mark.parametrize("dtype", FLOATS)
def test_beta_zero_ignores_nan_in_result(rng, dtype):
    a, b = draw(rng, (3, 3), dtype), draw(rng, (3, 2), dtype)
    r = np.full((3, 2), np.nan, dtype)
    method("addmm", T(r), 0, 1, T(a), T(b))
    np.testing.assert_allclose(r, a.astype(np.float64) @ b, **tol(dtype))
    v = np.full(3, np.nan, dtype)
    method("addmv", T(v), 0, 1, T(a), T(b[:, 0].copy()))
    np.testing.assert_allclose(v, a.astype(np.float64) @ b[:, 0], **tol(dtype))
    g = np.full((3, 2), np.nan, dtype)
    method("addr", T(g), 0, 1, T(a[:, 0].copy()), T(b[0].copy()))
    np.testing.assert_allclose(g, np.outer(a[:, 0], b[0]), **tol(dtype))


def test_mm_resizes_result_and_zero_sizes(rng):
    r = np.zeros(20)
    out = call("mm", T(r), T(draw(rng, (2, 3), np.float64)), T(draw(rng, (3, 4), np.float64)))
    assert N(out).shape == (2, 4)
    assert N(call("mm", T(np.zeros((0, 3))), T(np.ones((3, 4))))).shape == (0, 4)
    np.testing.assert_array_equal(N(call("mm", T(np.ones((3, 0))), T(np.ones((0, 4))))), np.zeros((3, 4)))
    m = draw(rng, (3, 4), np.float64)
    np.testing.assert_allclose(N(call("addmm", 2, T(m), T(np.ones((3, 0))), T(np.ones((0, 4))))), 2 * m)
    np.testing.assert_array_equal(N(call("mv", T(np.ones((3, 0))), T(np.ones(0)))), np.zeros(3))


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("la", LAYOUTS)
def test_mv_addmv(rng, dtype, la):
    a, x, y = draw(rng, (6, 4), dtype), draw(rng, 8, dtype)[::2], draw(rng, 6, dtype)
    ref = a.astype(np.float64) @ x
    np.testing.assert_allclose(N(call("mv", T(layout(a, la)), T(x))), ref, **tol(dtype))
    np.testing.assert_allclose(N(call("addmv", 2, T(y), 3, T(layout(a, la)), T(x[::-1]))),
                               2 * y + 3 * (a.astype(np.float64) @ x[::-1]), **tol(dtype))
    r = y.copy()
    method("addmv", T(r), T(a), T(x))
    np.testing.assert_allclose(r, y + ref, **tol(dtype))
    strided = np.zeros(12, dtype)
    method("mv", T(strided[::2]), T(layout(a, la)), T(x))
    np.testing.assert_allclose(strided[::2], ref, **tol(dtype))
    assert not strided[1::2].any()


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("lr", LAYOUTS)
def test_ger_addr(rng, dtype, lr):
    x, y, m = draw(rng, 5, dtype), draw(rng, 8, dtype)[::-2], draw(rng, (5, 4), dtype)
    outer = np.outer(x.astype(np.float64), y)
    np.testing.assert_allclose(N(call("ger", T(x), T(y))), outer, **tol(dtype))
    np.testing.assert_allclose(N(call("addr", 2, T(m), 3, T(x), T(y))), 2 * m + 3 * outer, **tol(dtype))
    r = layout(m, lr)
    method("addr", T(r), T(x), T(y))
    np.testing.assert_allclose(r, m + outer, **tol(dtype))
    r = layout(m, lr)
    method("addr", T(r), -1, 2, T(x), T(y))
    np.testing.assert_allclose(r, -m + 2 * outer, **tol(dtype))


@pytest.mark.parametrize("dtype", TYPES)
def test_bmm_baddbmm_addbmm(rng, dtype):
    b1, b2 = draw(rng, (4, 3, 5), dtype), draw(rng, (4, 5, 2), dtype)
    prods = np.einsum("bij,bjk->bik", b1.astype(np.float64), b2)
    np.testing.assert_allclose(N(call("bmm", T(b1), T(b2))), prods, **tol(dtype))
    np.testing.assert_allclose(N(call("bmm", T(b1.transpose(0, 2, 1).copy().transpose(0, 2, 1)),
                                           T(b2[:, ::-1].copy()[:, ::-1]))), prods, **tol(dtype))
    t3 = draw(rng, (4, 3, 2), dtype)
    np.testing.assert_allclose(N(call("baddbmm", 2, T(t3), 3, T(b1), T(b2))), 2 * t3 + 3 * prods, **tol(dtype))
    r = t3.copy()
    method("baddbmm", T(r), T(b1), T(b2))
    np.testing.assert_allclose(r, t3 + prods, **tol(dtype))
    t2 = draw(rng, (3, 2), dtype)
    np.testing.assert_allclose(N(call("addbmm", 2, T(t2), 3, T(b1), T(b2))),
                               2 * t2 + 3 * prods.sum(0), **tol(dtype))
    r = t2.copy()
    method("addbmm", T(r), 0, 1, T(b1), T(b2))
    np.testing.assert_allclose(r, prods.sum(0), **tol(dtype))
    strided = np.zeros((4, 3, 4), dtype)
    method("bmm", T(strided[:, :, ::2]), T(b1), T(b2))
    np.testing.assert_allclose(strided[:, :, ::2], prods, **tol(dtype))


@pytest.mark.parametrize("dtype", TYPES)
def test_dot(rng, dtype):
    a, b = draw(rng, (4, 6), dtype), draw(rng, (6, 4), dtype)
    ref = float(np.dot(a.ravel().astype(np.float64), b.ravel()))
    assert call("dot", T(a), T(b)) == pytest.approx(ref, rel=1e-5)
    assert method("dot", T(a[:, ::2]), T(b[::2])) == pytest.approx(
        float(np.dot(a[:, ::2].ravel().astype(np.float64), b[::2].ravel())), rel=1e-5)
    v = draw(rng, 10, dtype)
    assert call("dot", T(v[::-1]), T(v[::-1])) == pytest.approx(float(np.dot(v.astype(np.float64), v)), rel=1e-5)
    assert call("dot", T(np.zeros(0, dtype)), T(np.zeros(0, dtype))) == 0


def test_long_products_are_exact(lua):
    a = np.array([[2**40, 3], [1, 2**41]], np.int64)
    np.testing.assert_array_equal(N(call("mm", T(a), T(np.eye(2, dtype=np.int64) * 3))), a * 3)
    assert call("dot", T(np.array([2**31, 2**31], np.int64)), T(np.array([2**21, 1], np.int64))) == 2**52 + 2**31


def test_inputs_aliasing_the_result(rng):
    a, b = draw(rng, (4, 4), np.float64), draw(rng, (4, 4), np.float64)
    r = a.copy()
    method("mm", T(r), T(r), T(b))
    np.testing.assert_allclose(r, a @ b, rtol=1e-12)
    r = a.copy()
    method("addmm", T(r), T(r.T), T(b))
    np.testing.assert_allclose(r, a + a.T @ b, rtol=1e-12)
    v = draw(rng, 4, np.float64)
    r = v.copy()
    method("mv", T(r), T(a), T(r))
    np.testing.assert_allclose(r, a @ v, rtol=1e-12)


@pytest.mark.parametrize("code, message", [
    ("torch.mm(torch.Tensor(2, 3), torch.Tensor(4, 5))", "mm: size mismatch, 2x3 and 4x5"),
    ("torch.mm(torch.Tensor(2, 3), torch.Tensor(3))", "mm: expected 2D and 2D tensors, got 2D, 1D"),
    ("torch.mv(torch.Tensor(2, 3), torch.Tensor(4))", "mv: size mismatch, 2x3 and 4"),
    ("torch.bmm(torch.Tensor(2, 3, 4), torch.Tensor(3, 4, 5))", "bmm: size mismatch, equal number of batches"),
    ("torch.bmm(torch.Tensor(2, 3, 4), torch.Tensor(2, 5, 5))", "bmm: size mismatch, 2x3x4 and 2x5x5"),
    ("torch.ger(torch.Tensor(2, 2), torch.Tensor(3))", "ger: expected 1D and 1D tensors, got 2D, 1D"),
    ("torch.addmm(torch.Tensor(3, 3), torch.Tensor(2, 3), torch.Tensor(3, 5))",
     "addmm: size mismatch, t: 3x3, m1: 2x3, m2: 3x5"),
    ("torch.addr(torch.Tensor(3, 3), torch.Tensor(2), torch.Tensor(3))", "addr: size mismatch, t: 3x3, vec1: 2"),
    ("torch.addbmm(torch.Tensor(3, 3), torch.Tensor(2, 3, 4), torch.Tensor(2, 4, 2))", "addbmm: size mismatch, t: 3x3"),
    ("torch.mm(torch.Tensor(2, 2), torch.FloatTensor(2, 2))", "mm: expected torch.DoubleTensor, got torch.FloatTensor"),
    ("torch.mm(torch.HalfTensor(2, 2), torch.HalfTensor(2, 2))", "mm: not supported for torch.HalfTensor"),
    ("torch.Tensor(2, 2):addmm(1, torch.Tensor(2, 2), torch.Tensor(2, 2), torch.Tensor(2, 2))", "addmm: bad arguments"),
    ("torch.addmm(torch.Tensor(2, 2), 'x', torch.Tensor(2, 2), torch.Tensor(2, 2))", "addmm: bad arguments"),
    ("torch.dot(torch.Tensor(3), torch.Tensor(4))", "dot: inconsistent tensor size, 3 (3 elements) and 4"),
    ("torch.mm(3, torch.Tensor(2, 2))", "mm: first factor must be a tensor, got number"),
])
def test_errors(lua, code, message):
    assert_lua_error(code, message)


def test_failed_call_leaves_result_unchanged(lua):
    r = np.arange(6.0).reshape(2, 3)
    with pytest.raises(luabridge.LuaError, match="size mismatch"):
        method("mm", T(r), T(np.ones((4, 2))), T(np.ones((3, 3))))
    np.testing.assert_array_equal(r, np.arange(6.0).reshape(2, 3))


def test_numpy_fallback(monkeypatch):
    """Without the library (LUABRIDGE_BLAS=numpy) the products run as numpy calls; no LAPACK."""
    monkeypatch.setenv("LUABRIDGE_BLAS", "numpy")

    def work() -> tuple[object, str]:   # in a fresh thread: a runtime that reads the variable
        luabridge.require("torch")
        library = luabridge.require("torch.backend.cpu.blas").library
        rng = np.random.default_rng(5)
        for dtype in FLOATS:
            a, b, m = draw(rng, (5, 4), dtype), draw(rng, (4, 3), dtype), draw(rng, (5, 3), dtype)
            x, y = draw(rng, 4, dtype), draw(rng, 5, dtype)
            checks = [
                (call("mm", T(np.asfortranarray(a)), T(b)), a @ b),
                (call("addmm", 0.5, T(m), 2, T(a), T(layout(b, "strided"))), 0.5 * m + 2 * (a @ b)),
                (call("addmv", 2, T(y), -1, T(a), T(x[::-1].copy()[::-1])), 2 * y - a @ x),
                (call("addr", 2, T(a), 3, T(y), T(x)), 2 * a + 3 * np.outer(y, x)),
            ]
            for got, ref in checks:
                np.testing.assert_allclose(N(got), ref, **tol(dtype))
            assert call("dot", T(x), T(x)) == pytest.approx(float(x.astype(np.float64) @ x), rel=1e-5)
        with pytest.raises(luabridge.LuaError) as refused:
            call("gesv", T(np.eye(2)), T(np.eye(2)))
        return library, str(refused.value)

    library, lapack = in_fresh_thread(work)
    assert library is None
    assert "LAPACK is not available" in lapack


def test_library_found(lua):
    """numpy's own BLAS is found (numpy wheels ship it), so products skip Python entirely."""
    backend = luabridge.require("torch.backend.cpu.blas")
    assert backend.library and os.path.isfile(backend.library)
    assert backend.lapack is not None


gemm_op = lua_fn("""function(r, beta, m, alpha, a, b, batchSum)
  require('torch.backend').cpu.gemm(r, beta, m, alpha, a, b, batchSum)
end""")


@pytest.mark.parametrize("dtype", TYPES)
def test_gemm_op_forms(rng, dtype):
    """The op table's gemm, as nn calls it: every form of a . b, m apart from r or r itself."""
    A, B, M = draw(rng, (4, 3), dtype), draw(rng, (3, 5), dtype), draw(rng, (4, 5), dtype)
    x, y = draw(rng, 3, dtype), draw(rng, 4, dtype)
    BA, BB = draw(rng, (2, 4, 3), dtype), draw(rng, (2, 3, 5), dtype)

    def f(a: np.ndarray) -> np.ndarray:
        return a.astype(np.float64)

    cases = [  # (r's shape, beta, m, a, b, batchSum, reference)
        ((4, 5), 2, M, A, B, False, 2 * f(M) + 3 * f(A) @ B),
        ((4,), 2, y, A, x, False, 2 * f(y) + 3 * f(A) @ x),
        ((4, 3), 0, None, y, x, False, 3 * np.outer(f(y), x)),
        ((2, 4, 5), 0, None, BA, BB, False, 3 * f(BA) @ BB),
        ((2, 4, 5), 0, None, A, BB, False, 3 * f(A) @ BB),   # a matrix used for every batch
        ((2, 4, 5), 0, None, BA, B, False, 3 * f(BA) @ B),
        ((4, 5), 2, M, BA, BB, True, 2 * f(M) + 3 * (f(BA) @ BB).sum(0)),
    ]
    for shape, beta, m, a, b, batch_sum, ref in cases:
        r = np.full(shape, np.nan if dtype in FLOATS else 9, dtype)
        gemm_op(r, beta, T(m) if m is not None else T(r), 3, a, b, batch_sum)
        np.testing.assert_allclose(r, ref, **tol(dtype))
    # m is r itself: r = beta * r + alpha * a . b
    r = M.copy()
    gemm_op(r, 2, T(r), 3, A, B, False)
    np.testing.assert_allclose(r, 2 * f(M) + 3 * f(A) @ B, **tol(dtype))


def test_each_runtime_closes_its_loadavg_file():
    """Every thread's runtime opens /proc/loadavg for the free-CPU count; a runtime that ends
    (a threads worker, any Python thread) closes it, so pools made again and again leak no fds."""
    if not os.path.exists("/proc/loadavg"):
        pytest.skip("needs Linux's /proc/loadavg")

    def open_loadavg() -> int:
        return sum(os.path.realpath(f"/proc/self/fd/{f}") == "/proc/loadavg" for f in os.listdir("/proc/self/fd"))

    luabridge.require("torch.backend.cpu.blas")
    before = open_loadavg()
    for _ in range(10):
        thread = threading.Thread(target=lambda: luabridge.require("torch.backend.cpu.blas"))
        thread.start()
        thread.join()
    gc.collect()
    assert open_loadavg() <= before   # earlier tests' runtimes may close here too
