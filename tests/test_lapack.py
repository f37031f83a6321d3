"""LAPACK functions (lua/torch/math/lapack.lua) against numpy.linalg float64 references.

Decompositions are checked by reconstruction (U diag(S) V^T = A, Q R = A, ...) rather than by
sign conventions. torch7's layout conventions are checked too: results come back column-major
(strides 1, rows), reused result tensors are written in place.
"""
from functools import partial
from typing import Any

import numpy as np
import pytest

import luabridge
from helpers import N, T, assert_lua_error, call, tol, views

lapack_tol = partial(tol, single=1e-3, double=1e-9)   # factorizations lose a few more digits


def column_major(t: Any) -> bool:
    a = luabridge.to_numpy(t)
    return a.strides[0] == a.itemsize and a.strides[1] == a.itemsize * a.shape[0]


def well_conditioned(rng, n, dtype=np.float64) -> np.ndarray:
    return (rng.standard_normal((n, n)) + n * np.eye(n)).astype(dtype)


def spd(rng, n) -> np.ndarray:
    m = rng.standard_normal((n, n))
    return m @ m.T + n * np.eye(n)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_gesv(rng, dtype):
    a, b = well_conditioned(rng, 6, dtype), rng.standard_normal((6, 3)).astype(dtype)
    for av, bv in zip(views(a), views(b)):
        x, lu = call("gesv", T(bv), T(av))
        np.testing.assert_allclose(N(x), np.linalg.solve(a.astype(np.float64), b), **lapack_tol(dtype))
        assert column_major(x) and column_major(lu)
        # LU holds L (unit lower) and U: L U is A with its rows permuted
        f = N(lu).astype(np.float64)
        rebuilt = (np.tril(f, -1) + np.eye(6)) @ np.triu(f)
        order = [int(np.argmin(np.abs(a - row).sum(1))) for row in rebuilt]
        assert sorted(order) == list(range(6))
        np.testing.assert_allclose(rebuilt, a[order], **lapack_tol(dtype))
    x, _ = call("gesv", T(b[:, 0].copy()), T(a))
    np.testing.assert_allclose(N(x)[:, 0], np.linalg.solve(a.astype(np.float64), b[:, 0]), **lapack_tol(dtype))


def test_gesv_result_tensors_and_in_place(rng):
    a, b = well_conditioned(rng, 5), rng.standard_normal((5, 3))
    ref = np.linalg.solve(a, b)
    rb, ra = np.zeros((3, 5)), np.zeros((5, 5))
    tb, ta = T(rb), T(ra)
    xb, xa = call("gesv", tb, ta, T(b), T(a))
    np.testing.assert_allclose(N(tb), ref, rtol=1e-10)
    assert column_major(tb) and column_major(ta)
    call("gesv", tb, ta, T(b), T(a))   # reused: same results
    np.testing.assert_allclose(N(tb), ref, rtol=1e-10)
    bf, af = np.asfortranarray(b), np.asfortranarray(a)
    tbf = T(bf)
    call("gesv", tbf, T(af), tbf, T(af))
    np.testing.assert_allclose(bf, ref, rtol=1e-10)


@pytest.mark.parametrize("uplo", ["U", "L"])
@pytest.mark.parametrize("trans", ["N", "T"])
@pytest.mark.parametrize("diag", ["N", "U"])
def test_trtrs(rng, uplo, trans, diag):
    a, b = well_conditioned(rng, 5), rng.standard_normal((5, 2))
    tri = np.triu(a) if uplo == "U" else np.tril(a)
    if diag == "U":
        tri = tri - np.diag(np.diag(tri)) + np.eye(5)
    op = tri.T if trans == "T" else tri
    for av in views(a if diag == "U" else tri):
        x, _ = call("trtrs", T(b), T(av), uplo, trans, diag)
        np.testing.assert_allclose(N(x), np.linalg.solve(op, b), rtol=1e-9, atol=1e-9)


def test_trtrs_defaults(rng):
    a, b = np.triu(well_conditioned(rng, 4)), rng.standard_normal((4, 2))
    x, _ = call("trtrs", T(b), T(a))
    np.testing.assert_allclose(N(x), np.linalg.solve(a, b), rtol=1e-9)


@pytest.mark.parametrize("shape", [(7, 4), (4, 4), (3, 6)])
def test_gels(rng, shape):
    a, b = rng.standard_normal(shape), rng.standard_normal((shape[0], 2))
    ref = np.linalg.lstsq(a, b, rcond=None)[0]   # least squares, or minimum norm when m < n
    for av, bv in zip(views(a), views(b)):
        x, _ = call("gels", T(bv), T(av))
        np.testing.assert_allclose(N(x), ref, rtol=1e-9, atol=1e-9)
    rb = np.zeros(1)
    x, _ = call("gels", T(rb), T(np.zeros(1)), T(b), T(a))
    np.testing.assert_allclose(N(x), ref, rtol=1e-9, atol=1e-9)


def test_eig(rng):
    a = rng.standard_normal((6, 6))
    e, v = call("eig", T(a))
    got = N(e)
    assert got.shape == (6, 2)
    np.testing.assert_allclose(np.sort_complex(got[:, 0] + 1j * got[:, 1]), np.sort_complex(np.linalg.eigvals(a)),
                               rtol=1e-9, atol=1e-9)
    # real eigenvalues: A V = V diag(e)
    p = rng.standard_normal((5, 5))
    s = p @ np.diag([1.0, -2.0, 3.0, 4.5, -0.5]) @ np.linalg.inv(p)
    for sv in views(s):
        e, v = call("eig", T(sv), "V")
        vals, vecs = N(e)[:, 0], N(v)
        np.testing.assert_allclose(N(e)[:, 1], 0, atol=1e-9)
        np.testing.assert_allclose(s @ vecs, vecs * vals, rtol=1e-8, atol=1e-8)
        assert column_major(v)
    re, rv = np.zeros((2, 2)), np.zeros((5, 5))
    te, tv = T(re), T(rv)
    call("eig", te, tv, T(s), "V")
    assert column_major(tv)   # torch7 leaves the eigenvector result transposed
    np.testing.assert_allclose(s @ N(tv), N(tv) * N(te)[:, 0], rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("uplo", ["U", "L"])
def test_symeig(rng, uplo):
    s = spd(rng, 6) - 6 * np.eye(6)
    only = np.triu(s) + np.tril(rng.standard_normal((6, 6)), -1) if uplo == "U" else \
        np.tril(s) + np.triu(rng.standard_normal((6, 6)), 1)
    e, _ = call("symeig", T(only), "N", uplo)
    np.testing.assert_allclose(N(e), np.linalg.eigvalsh(s), rtol=1e-9, atol=1e-9)
    for ov in views(only):
        e, v = call("symeig", T(ov), "V", uplo)
        np.testing.assert_allclose(N(v) @ np.diag(N(e)) @ N(v).T, s, rtol=1e-9, atol=1e-9)
    re, rv = np.zeros(3), np.zeros((6, 6))
    te, tv = T(re), T(rv)
    call("symeig", te, tv, T(s), "V")
    assert column_major(tv)
    np.testing.assert_allclose(N(tv) @ np.diag(N(te)) @ N(tv).T, s, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("shape", [(6, 4), (4, 6), (5, 5)])
@pytest.mark.parametrize("job", ["S", "A"])
def test_svd(rng, shape, job):
    a = rng.standard_normal(shape)
    m, n = shape
    k = min(m, n)
    for av in views(a):
        u, s, v = call("svd", T(av), job)
        U, S, V = N(u), N(s), N(v)
        assert U.shape == (m, m if job == "A" else k) and S.shape == (k,) and V.shape == (n, n if job == "A" else k)
        np.testing.assert_allclose(S, np.linalg.svd(a, compute_uv=False), rtol=1e-9)
        np.testing.assert_allclose(U[:, :k] @ np.diag(S) @ V[:, :k].T, a, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(U.T @ U, np.eye(U.shape[1]), atol=1e-9)
        np.testing.assert_allclose(V.T @ V, np.eye(V.shape[1]), atol=1e-9)
        assert column_major(u)


def test_svd_into_non_contiguous_results(rng):
    a = rng.standard_normal((5, 5))
    ub, sb, vb = np.zeros((5, 2, 5)), np.zeros((5, 2)), np.zeros((5, 2, 5))
    u, s, v = call("svd", T(ub[:, 1]), T(sb[:, 1]), T(vb[:, 1]), T(a))
    np.testing.assert_allclose(N(u) @ np.diag(N(s)) @ N(v).T, a, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_inverse(rng, dtype):
    a = well_conditioned(rng, 5, dtype)
    for av in views(a):
        inv = call("inverse", T(av))
        np.testing.assert_allclose(N(inv), np.linalg.inv(a.astype(np.float64)), **lapack_tol(dtype))
        assert column_major(inv)
    r = np.zeros((5, 5), dtype)
    tr = T(r)
    call("inverse", tr, T(a))
    assert column_major(tr)
    np.testing.assert_allclose(N(tr), np.linalg.inv(a.astype(np.float64)), **lapack_tol(dtype))


@pytest.mark.parametrize("uplo", ["U", "L"])
def test_cholesky_family(rng, uplo):
    a, b = spd(rng, 6), rng.standard_normal((6, 3))
    for av in views(a):
        c = N(call("potrf", T(av), uplo))
        assert np.allclose(c, np.triu(c) if uplo == "U" else np.tril(c))
        np.testing.assert_allclose(c.T @ c if uplo == "U" else c @ c.T, a, rtol=1e-10)
        np.testing.assert_allclose(N(call("potrs", T(b), T(c), uplo)), np.linalg.solve(a, b), rtol=1e-9)
        np.testing.assert_allclose(N(call("potri", T(c), uplo)), np.linalg.inv(a), rtol=1e-9, atol=1e-12)
    c = N(call("potrf", T(a)))   # default 'U'
    np.testing.assert_allclose(c.T @ c, a, rtol=1e-10)
    np.testing.assert_allclose(N(call("potrs", T(b[:, 0].copy()), T(c)))[:, 0], np.linalg.solve(a, b[:, 0]), rtol=1e-9)


@pytest.mark.parametrize("uplo", ["U", "L"])
@pytest.mark.parametrize("rank", [2, 5])
def test_pstrf(rng, uplo, rank):
    m = rng.uniform(size=(5, rank))
    a = m @ m.T + 1e-7 * np.eye(5)
    for args in ([T(a), uplo], [T(np.zeros((5, 5))), luabridge.eval("torch.IntTensor(5)"), T(a), uplo]):
        u, piv = call("pstrf", *args)
        p = N(piv)
        assert p.dtype == np.int32 and sorted(p) == [1, 2, 3, 4, 5]
        f = N(u)
        rebuilt = f.T @ f if uplo == "U" else f @ f.T
        np.testing.assert_allclose(rebuilt, a[np.ix_(p - 1, p - 1)], rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("shape", [(7, 4), (4, 4), (3, 6)])
def test_qr(rng, shape):
    a = rng.standard_normal(shape)
    k = min(shape)
    for av in views(a):
        q, r = call("qr", T(av))
        Q, R = N(q), N(r)
        assert Q.shape == (shape[0], k) and R.shape == (k, shape[1])
        np.testing.assert_allclose(Q @ R, a, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(Q.T @ Q, np.eye(k), atol=1e-10)
        np.testing.assert_array_equal(R, np.triu(R))
        assert column_major(q)


def test_geqrf_orgqr_ormqr(rng):
    a, c = rng.standard_normal((5, 5)), rng.standard_normal((5, 3))
    packed, tau = call("geqrf", T(a))
    q = N(call("orgqr", packed, tau))
    np.testing.assert_allclose(q @ np.triu(N(packed)), a, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(N(call("ormqr", packed, tau, T(c))), q @ c, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(N(call("ormqr", packed, tau, T(c), "L", "T")), q.T @ c, rtol=1e-10, atol=1e-10)
    ct = c.T.copy()
    np.testing.assert_allclose(N(call("ormqr", packed, tau, T(ct), "R", "N")), ct @ q, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(N(call("ormqr", packed, tau, T(ct), "R", "T")), ct @ q.T, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("code, message", [
    ("torch.gesv(torch.Tensor(3, 1), torch.zeros(3, 3))", "gesv: U(1,1) is zero, singular U"),
    ("torch.gesv(torch.Tensor(3, 1), torch.Tensor(3, 2))", "gesv: A should be square, but is 3x2"),
    ("torch.gesv(torch.Tensor(2, 1), torch.eye(3))", "gesv: A,B size incompatible - A has 3 rows, B has 2"),
    ("torch.gesv(torch.Tensor(3, 1, 1), torch.eye(3))", "gesv: B should have 1 or 2 dimensions, but has 3"),
    ("torch.gesv(torch.Tensor(3), torch.Tensor(3))", "gesv: A should have 2 dimensions, but has 1"),
    ("torch.gesv(torch.FloatTensor(3, 1), torch.eye(3))", "gesv: expected torch.DoubleTensor, got torch.FloatTensor"),
    ("torch.gesv(torch.IntTensor(3, 1), torch.IntTensor(3, 3))", "only torch.FloatTensor and torch.DoubleTensor"),
    ("torch.inverse(torch.Tensor(0, 0))", "inverse: A is empty"),
    ("torch.trtrs(torch.Tensor(3, 1), torch.eye(3), 'X')", "trtrs: uplo must be 'U' or 'L', got X"),
    ("torch.symeig(torch.eye(3), 'Q')", "symeig: jobz must be 'N' or 'V', got Q"),
    ("torch.svd(torch.eye(3), 'B')", "svd: jobu must be 'S' or 'A', got B"),
    ("torch.potrf(torch.diag(torch.Tensor({-1, 1, 1})))", "potrf: the leading minor of order 1 is not positive definite"),
    ("torch.inverse(torch.zeros(3, 3))", "inverse: U(1,1) is 0, U is singular"),
    ("torch.pstrf(torch.eye(2), torch.LongTensor(2), torch.eye(2))", "pstrf: the pivots result must be a torch.IntTensor"),
    ("torch.pstrf(torch.diag(torch.Tensor({-1, -1, -1})))", "pstrf: matrix is rank deficient or not positive semidefinite"),
    ("torch.ormqr(torch.eye(3), torch.ones(3), torch.ones(4, 2))", "ormqr: A (3x3) should have 4 rows"),
])
def test_errors(lua, code, message):
    assert_lua_error(code, message)


def test_failed_solve_leaves_inputs_unchanged(lua):
    a, b = np.zeros((3, 3)), np.ones((3, 2))
    with pytest.raises(luabridge.LuaError, match="singular"):
        call("gesv", T(b), T(a))
    np.testing.assert_array_equal(a, 0)
    np.testing.assert_array_equal(b, 1)
