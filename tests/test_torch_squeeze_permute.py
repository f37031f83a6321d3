"""torch.squeeze([res,] x [,dim]) and torch.permute(x, ...): torch7's function forms (TensorMath's
squeeze wrap, Tensor.lua's `torch.permute = Tensor.permute`; Kaixhin/Autoencoders' main.lua calls
torch.permute). Checked against numpy's squeeze and transpose; a one-element result is a number,
as torch7's squeeze postcall pushed; x itself is left as it was.
"""
import numpy as np
import pytest

from helpers import N, T, lua_fn


@pytest.fixture(scope="module")
def f(lua):
    return {
        "sq": lua_fn("function(x, d) local y = torch.squeeze(x, d) return y, x:dim() end"),
        "sqres": lua_fn("function(x, d) local r = torch.Tensor() local y = torch.squeeze(r, x, d) return r, rawequal(y, r) end"),
        "perm": lua_fn("function(x, a, b, c) return torch.permute(x, a, b, c) end"),
        "bad": lua_fn("function() return pcall(torch.permute, 3, 1) end"),
    }


def test_squeeze_all(f):
    x = np.random.default_rng(1).normal(size=(2, 1, 3, 1))
    y, dim = f["sq"](T(x), None)
    np.testing.assert_array_equal(N(y), np.squeeze(x))
    assert dim == 4


def test_squeeze_dim(f):
    x = np.random.default_rng(2).normal(size=(2, 1, 3))
    y, _ = f["sq"](T(x), 2)
    np.testing.assert_array_equal(N(y), np.squeeze(x, 1))


def test_squeeze_into_res(f):
    x = np.random.default_rng(3).normal(size=(1, 4, 1))
    r, same = f["sqres"](T(x), None)
    np.testing.assert_array_equal(N(r), np.squeeze(x))
    assert same


def test_squeeze_one_element_is_a_number(f):
    y, _ = f["sq"](T(np.array([[7.5]])), None)
    assert y == 7.5


@pytest.mark.parametrize("perm", [(3, 1, 2), (2, 3, 1), (1, 2, 3), (3, 2, 1)])
def test_permute(f, perm):
    x = np.random.default_rng(4).normal(size=(2, 3, 4))
    got = N(f["perm"](T(x), *perm))
    np.testing.assert_array_equal(got, np.transpose(x, [p - 1 for p in perm]))


def test_permute_needs_a_tensor(f):
    ok, err = f["bad"]()
    assert not ok and "permute" in err and "tensor" in err
