"""libunsup: koraykv/unsup's C half (init.c, generic/util.c), written in Lua.

require 'libunsup' makes the global unsup table and gives torch.FloatTensor and
torch.DoubleTensor the in-place soft threshold shrinkage(lambda). The reference is the C loop in
numpy float64: x > l -> x - l, x < -l -> x + l, otherwise 0 (a NaN is neither, so 0); l = 0
leaves the tensor untouched; a negative l is refused with the C's message.
"""
import numpy as np
import pytest

from helpers import N, T, lua_fn


def reference(x: np.ndarray, lam: float) -> np.ndarray:
    if lam == 0:
        return x.copy()
    out = np.zeros_like(x)
    hi, lo = x > lam, x < -lam
    out[hi] = x[hi] - lam
    out[lo] = x[lo] + lam
    return out


@pytest.fixture(scope="module")
def shrink(lua):
    return lua_fn("""function(x, lam, kind, transpose)
      require 'libunsup'
      local t = x:type(kind)
      if transpose then t = t:t() end
      local r = t:shrinkage(lam)
      if transpose then t = t:t() end
      return t:double(), r, type(unsup)
    end""")


@pytest.mark.parametrize("kind", ["torch.DoubleTensor", "torch.FloatTensor"])
@pytest.mark.parametrize("lam", [0.0, 0.25, 1.0, 3.0])
def test_matches_the_c_loop(shrink, kind, lam):
    rng = np.random.default_rng(7)
    x = rng.normal(0, 1.5, (5, 7))
    x[0, :4] = [lam, -lam, 0.0, np.nan]
    if kind == "torch.FloatTensor":
        x = x.astype(np.float32).astype(np.float64)
        lam32 = float(np.float32(lam))
    else:
        lam32 = lam
    got, returned, unsup = shrink(T(x.copy()), lam, kind, False)
    want = reference(x, lam32)
    if lam == 0:
        assert np.isnan(N(got)[0, 3])
    np.testing.assert_allclose(np.nan_to_num(N(got), nan=-99), np.nan_to_num(want, nan=-99), rtol=1e-6, atol=1e-6)
    assert returned == lam and unsup == "table"


def test_non_contiguous(shrink):
    x = np.random.default_rng(3).normal(0, 1, (4, 6))
    got, _, _ = shrink(T(x.copy()), 0.5, "torch.DoubleTensor", True)
    np.testing.assert_array_equal(N(got), reference(x, 0.5))


def test_negative_lambda_refused(shrink):
    with pytest.raises(Exception, match="Lambda should be non-negative"):
        shrink(T(np.ones((2, 2))), -0.1, "torch.DoubleTensor", False)
