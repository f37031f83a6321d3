"""Numeric strings are numbers to the torch library, as torch7's C functions read them with
lua_isnumber ('3', ' 2.5 ', '0x10'): each family (pointwise, reduce, index, construct, random
seeds, storages, nn constructors) against numpy, and non-numeric strings still refused by name."""
from __future__ import annotations

import numpy as np
import pytest

import luabridge
from helpers import N, T, assert_lua_error, lua_fn

X = np.arange(1.0, 7.0).reshape(2, 3)   # [[1 2 3] [4 5 6]]

# (Lua function of the tensor x = X, numpy reference of its result)
CASES = {
    # pointwise: a number operand, overloads told apart by type (number vs tensor)
    "fill": ("function(x) return x:clone():fill('3') end", np.full((2, 3), 3.0)),
    "fill_spaces": ("function(x) return x:clone():fill(' 2.5 ') end", np.full((2, 3), 2.5)),
    "fill_hex": ("function(x) return x:clone():fill('0x10') end", np.full((2, 3), 16.0)),
    "add": ("function(x) return x:clone():add('2') end", X + 2),
    "add_scaled": ("function(x) return x:clone():add('2', x) end", X + 2 * X),
    "torch_add": ("function(x) return torch.add(x, '-1.5') end", X - 1.5),
    "mul": ("function(x) return torch.mul(x, '1e1') end", X * 10),
    "pow": ("function(x) return torch.pow(x, '2') end", X ** 2),
    "pow_base": ("function(x) return torch.pow('2', x) end", 2.0 ** X),
    "clamp": ("function(x) return x:clone():clamp('2', '4') end", np.clip(X, 2, 4)),
    "addcmul": ("function(x) return x:clone():addcmul('0.5', x, x) end", X + 0.5 * X * X),
    "lerp": ("function(x) return torch.lerp(x, x * 3, '0.5') end", X * 2),
    "gt": ("function(x) return x:gt('3'):double() end", (X > 3).astype(float)),
    # reduce: dimensions and p
    "sum_dim": ("function(x) return x:sum('2') end", X.sum(1, keepdims=True)),
    "max_dim": ("function(x) return (x:max('1')) end", X.max(0, keepdims=True)),
    "cumsum": ("function(x) return torch.cumsum(x, '2') end", np.cumsum(X, 1)),
    "norm_p": ("function(x) return torch.Tensor{x:norm('1')} end", np.array([np.abs(X).sum()])),
    "mean_dim": ("function(x) return torch.mean(x, '1') end", X.mean(0, keepdims=True)),
    # index and views
    "narrow": ("function(x) return x:narrow(2, '2', '2') end", X[:, 1:3]),
    "select": ("function(x) return x:select('1', '2') end", X[1]),
    "sub": ("function(x) return x:sub('1', '1', '2', '3') end", X[0:1, 1:3]),
    "transpose": ("function(x) return x:transpose('1', '2') end", X.T),
    "view": ("function(x) return x:view('3', '2') end", X.reshape(3, 2)),
    "index": ("function(x) return x:index('2', torch.LongTensor{3, 1}) end", X[:, [2, 0]]),
    "indexFill": ("function(x) return x:clone():indexFill('2', torch.LongTensor{2}, '-1') end",
                  np.where(np.arange(3) == 1, -1.0, X)),
    "cat_dim": ("function(x) return torch.cat(x, x, '1') end", np.concatenate([X, X], 0)),
    "topk": ("function(x) return (x:view(6):topk('2')) end", np.sort(X.ravel())[:2]),
    "size": ("function(x) return torch.Tensor{x:size('2')} end", np.array([3.0])),
    # constructors and shapes
    "tensor_size": ("function() return torch.Tensor('3'):fill(7) end", np.full(3, 7.0)),
    "tensor_sizes": ("function() return torch.DoubleTensor('2', '3'):zero() end", np.zeros((2, 3))),
    "zeros": ("function() return torch.zeros('2', '3') end", np.zeros((2, 3))),
    "ones": ("function() return torch.ones('4') end", np.ones(4)),
    "range": ("function() return torch.range('1', '5', '2') end", np.array([1.0, 3.0, 5.0])),
    "linspace": ("function() return torch.linspace('0', '1', '5') end", np.linspace(0, 1, 5)),
    "eye": ("function() return torch.eye('3') end", np.eye(3)),
    "resize": ("function(x) return x:clone():resize('3', '2'):fill(1) end", np.ones((3, 2))),
    "reshape": ("function(x) return torch.reshape(x, '3', '2') end", X.reshape(3, 2)),
    "repeatTensor": ("function(x) return x:repeatTensor('2', '1') end", np.tile(X, (2, 1))),
    "randn_shape": ("function() return torch.randn('2', '3'):fill(0) end", np.zeros((2, 3))),
    "uniform_range": ("function() local t = torch.Tensor(50):uniform('4', '4') return t end", np.full(50, 4.0)),
    # storages
    "storage_fill": ("function() return torch.DoubleTensor(torch.DoubleStorage(3):fill('2')) end",
                     np.full(3, 2.0)),
    "storage_resize": ("function() return torch.DoubleTensor(torch.DoubleStorage(1):resize('4'):fill(1)) end",
                       np.ones(4)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_numeric_string_is_a_number(lua, name):
    code, want = CASES[name]
    got = N(lua_fn(code)(T(X.copy())))
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12, err_msg=name)


def test_random_seeds_and_threads(lua):
    draws = lua_fn("""function(seed)
      torch.manualSeed(seed)
      local a = torch.rand(4)
      torch.setnumthreads('2')
      return a, torch.getnumthreads()
    end""")
    by_string, threads = draws("123")
    by_number, _ = draws(123)
    np.testing.assert_array_equal(N(by_string), N(by_number))
    assert threads == 2
    torch_random = lua_fn("function() torch.manualSeed(7) return torch.Tensor(200):random('3', '5') end")
    values = N(torch_random())
    assert values.min() >= 3 and values.max() <= 5 and len(np.unique(values)) == 3


def test_nn_constructors(lua):
    linear = lua_fn("""function(x)
      local m = nn.Linear('3', '2')
      m.weight:fill(1) m.bias:fill(0.5)
      return m:forward(x), torch.Tensor{m.weight:size(1), m.weight:size(2)}
    end""")
    luabridge.require("nn")
    out, size = linear(T(X.copy()))
    np.testing.assert_allclose(N(out), X.sum(1, keepdims=True).repeat(2, 1) + 0.5)
    np.testing.assert_array_equal(N(size), [2, 3])
    leaky = lua_fn("function(x) return nn.LeakyReLU('0.1'):forward(x) end")
    v = np.array([-2.0, 3.0])
    np.testing.assert_allclose(N(leaky(T(v))), np.where(v > 0, v, 0.1 * v))
    narrow = lua_fn("function(x) return nn.Narrow('2', '2', '2'):forward(x) end")
    np.testing.assert_allclose(N(narrow(T(X.copy()))), X[:, 1:3])
    join = lua_fn("function(x) return nn.JoinTable('1'):forward({x, x}) end")
    np.testing.assert_allclose(N(join(T(X.copy()))), np.concatenate([X, X], 0))
    reshape = lua_fn("function(x) return nn.Reshape('3', '2'):forward(x) end")
    np.testing.assert_allclose(N(reshape(T(X.copy()))), X.reshape(3, 2))


@pytest.mark.parametrize("code, message", [
    ("torch.Tensor(2):fill('x')", "fill: value must be a number, got 'x'"),
    ("torch.Tensor(2):add('two')", "add: invalid arguments (torch.DoubleTensor, string)"),
    ("torch.Tensor(2, 3):sum('last')", "sum: dimension must be an integer"),
    ("torch.Tensor(4):narrow(1, 'a', 2)", "narrow"),
    ("torch.zeros('2', 'x')", "zeros"),
    ("torch.Tensor('abc')", "torch.DoubleTensor: expected sizes"),
    ("torch.manualSeed('seed')", "manualSeed: seed must be a number, got 'seed'"),
    ("torch.DoubleStorage(2):fill('x')", "fill: value must be a number, got 'x'"),
    ("require 'nn'; nn.Linear('three', 4)", "nn.Linear: inputSize must be an integer >= 0, got 'three'"),
    ("torch.Tensor(2):fill('1e')", "fill: value must be a number, got '1e'"),
])
def test_non_numeric_string_is_refused(lua, code, message):
    assert_lua_error(code, message)


def test_string_arguments_stay_names(lua):
    # a numeric-looking text is still text where torch7 took a string: a CharStorage's contents
    text = lua_fn("function() return torch.CharStorage():string('123'):string() end")
    assert text() == "123"
    assert lua_fn("function() return torch.type('3') end")() == "string"
    # torch7's storage constructors take a string first as a file to map, whatever it reads as
    assert_lua_error("torch.DoubleStorage('3')", "torch.DoubleStorage: cannot map file <3>")


def test_timer_mark(lua):
    elapsed = lua_fn("function() return torch.toc(tostring(torch.tic() - 1)) end")()
    assert 1.0 <= elapsed < 60.0
