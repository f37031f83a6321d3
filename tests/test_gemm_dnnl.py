"""Float32 products on oneDNN's matmul (torch.backend.cpu.dnnl, where installed): addmm over
transposed and padded operands and several betas against numpy float64, with the OpenBLAS path
as a second check; which products take it (Float, alpha 1, one thread, from
blas.dnnlGemmWork multiply-adds) and which stay on OpenBLAS."""
import numpy as np
import pytest

from helpers import N, lua_fn

available = lua_fn("function() return require('torch.backend.cpu.dnnl').available end")
pytestmark = pytest.mark.skipif(not available(), reason="oneDNN is not installed (pip install 'luabridge[onednn]')")

# C:addmm(beta, alpha, A, B) with oneDNN on or off: returns C and how many products oneDNN ran.
addmm = lua_fn("""function(onednn, threads, beta, alpha, c, a, b)
  local dnnl, blas = require 'torch.backend.cpu.dnnl', require 'torch.backend.cpu.blas'
  local was, sgemm, oldThreads, watch = dnnl.enabled, dnnl.sgemm, torch.getnumthreads(), blas.watchLoad
  local calls = 0
  dnnl.enabled, blas.watchLoad = onednn, false   -- the thread count by size alone
  dnnl.sgemm = function(...) calls = calls + 1; return sgemm(...) end
  torch.setnumthreads(threads)
  local ok, err = pcall(function() c:addmm(beta, alpha, a, b) end)
  dnnl.enabled, dnnl.sgemm, blas.watchLoad = was, sgemm, watch
  torch.setnumthreads(oldThreads)
  if not ok then error(err) end
  return c, calls
end""")


def operand(rng: np.random.Generator, rows: int, cols: int, kind: str, dtype=np.float32) -> np.ndarray:
    """A rows x cols array laid out as `kind`: contiguous, transposed (column-major), or a
    column slice of a wider array (a leading dimension larger than the row)."""
    if kind == "t":
        return np.ascontiguousarray(rng.standard_normal((cols, rows)).astype(dtype)).T
    if kind == "pad":
        return rng.standard_normal((rows, cols + 7)).astype(dtype)[:, 3:3 + cols]
    return rng.standard_normal((rows, cols)).astype(dtype)


SHAPES = [(32, 128, 512), (32, 512, 128), (512, 32, 128), (65, 128, 32), (100, 70, 90)]


@pytest.mark.parametrize("m,k,n", SHAPES)
@pytest.mark.parametrize("kinds", [("c", "c"), ("t", "c"), ("c", "t"), ("t", "t"), ("pad", "pad")])
@pytest.mark.parametrize("beta", [0.0, 1.0, 0.5])
def test_float_products_match_float64(m: int, k: int, n: int, kinds: tuple[str, str], beta: float) -> None:
    rng = np.random.default_rng(m * 7 + k * 3 + n)
    a, b = operand(rng, m, k, kinds[0]), operand(rng, k, n, kinds[1])
    c0 = rng.standard_normal((m, n)).astype(np.float32)
    want = beta * c0.astype(np.float64) + a.astype(np.float64) @ b.astype(np.float64)
    got, calls = addmm(True, 1, beta, 1.0, c0.copy(), a, b)
    assert calls == 1   # every shape here is over blas.dnnlGemmWork
    np.testing.assert_allclose(N(got), want, rtol=1e-4, atol=1e-4 * np.sqrt(k))
    blas_got, blas_calls = addmm(False, 1, beta, 1.0, c0.copy(), a, b)
    assert blas_calls == 0
    np.testing.assert_allclose(N(got), N(blas_got), rtol=1e-4, atol=1e-4 * np.sqrt(k))


def test_beta_zero_ignores_nan_in_c() -> None:
    """beta 0 overwrites C, as BLAS: NaNs there do not reach the result."""
    rng = np.random.default_rng(3)
    a, b = operand(rng, 64, 64, "c"), operand(rng, 64, 64, "c")
    c0 = np.full((64, 64), np.nan, dtype=np.float32)
    got, calls = addmm(True, 1, 0.0, 1.0, c0, a, b)
    assert calls == 1
    np.testing.assert_allclose(N(got), a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("case", ["double", "alpha", "small", "threaded"])
def test_products_that_stay_on_openblas(case: str) -> None:
    """Double, alpha != 1, under blas.dnnlGemmWork multiply-adds, or split over threads."""
    rng = np.random.default_rng(5)
    size, alpha, threads, dtype = 64, 1.0, 1, np.float32
    if case == "double":
        dtype = np.float64
    elif case == "alpha":
        alpha = 2.0
    elif case == "small":
        size = 16
    else:
        size, threads = 512, 2   # 512^3 multiply-adds: two threads by blas.gemmLeast
    a, b = operand(rng, size, size, "c", dtype), operand(rng, size, size, "c", dtype)
    c0 = rng.standard_normal((size, size)).astype(dtype)
    want = c0.astype(np.float64) + alpha * (a.astype(np.float64) @ b.astype(np.float64))
    got, calls = addmm(True, threads, 1.0, alpha, c0.copy(), a, b)
    assert calls == 0
    np.testing.assert_allclose(N(got), want, rtol=1e-4, atol=1e-3 * np.sqrt(size))
