"""Real numbers inside an index table, as torch7 read them.

torch7's generic/Tensor.c reads each number of t[{...}] (a selecting number or a range's ends)
as `long z = lua_tonumber(L, -1) - 1`: a C cast, truncating toward zero, and only then counts a
negative one from the end. So {2.7} narrows to row 2, {-1.5} is the last row, {0.5} the first
one. rlenvs' Catch draws its ball at t[{{1}, {y}, {x}}] with a real x. The reference below is
that rule in float64, independent of the Lua code.
"""
import math

import numpy as np
import pytest

from helpers import N, T, lua_fn


def c_index(x: float, n: int) -> int:
    """torch7's 0-based index for the Lua number x along a dimension of size n."""
    z = math.trunc(x - 1)
    return n + z + 1 if z < 0 else z


@pytest.fixture(scope="module")
def f(lua):
    return {
        "range": lua_fn("function(t, a, b) return t[{{a, b}}] end"),
        "rows": lua_fn("function(t, a, b, c, d) return t[{{a, b}, {c, d}}] end"),
        "sel": lua_fn("function(t, a, b) return t[{a, b}] end"),
        "selrow": lua_fn("function(t, a, c, d) return t[{a, {c, d}}] end"),
        "put": lua_fn("function(t, a, c, d, v) t[{{a}, {c, d}}] = v return t end"),
    }


A = np.arange(20.0).reshape(4, 5)


@pytest.mark.parametrize("a,b", [(2.7, 3.2), (1.0, 4.9), (-1.5, -1.2), (0.5, 2.0), (-3.9, 4.0), (2.0, 2.0)])
def test_range_truncates(f, a, b):
    s, e = c_index(a, 4), c_index(b, 4)
    np.testing.assert_array_equal(N(f["range"](T(A), a, b)), A[s:e + 1])


def test_two_ranges(f):
    got = N(f["rows"](T(A), 1.9, 3.5, 2.2, 4.999))
    np.testing.assert_array_equal(got, A[c_index(1.9, 4):c_index(3.5, 4) + 1, c_index(2.2, 5):c_index(4.999, 5) + 1])


@pytest.mark.parametrize("a,b", [(2.5, 4.99), (1.1, -1.5), (4.9, 1.0)])
def test_numbers_select(f, a, b):
    assert f["sel"](T(A), a, b) == A[c_index(a, 4), c_index(b, 5)]


def test_number_then_range(f):
    got = N(f["selrow"](T(A), 3.6, 1.5, 2.5))
    np.testing.assert_array_equal(got, A[c_index(3.6, 4), c_index(1.5, 5):c_index(2.5, 5) + 1])


def test_assign_with_real_ranges(f):
    want = A.copy()
    want[c_index(2.2, 4):c_index(2.2, 4) + 1, c_index(3.7, 5):c_index(4.1, 5) + 1] = -1
    np.testing.assert_array_equal(N(f["put"](T(A), 2.2, 3.7, 4.1, -1)), want)


def test_out_of_range_still_fails(f):
    # {0} and {5.5} are out of range in torch7 too: (long)(0 - 1) = -1 counts to n, past the end
    for a in (0, 5.5):
        with pytest.raises(Exception, match="out of range"):
            f["range"](T(A), a, a)
