"""nn.LinearRNN and nn.LookupRNN, torch/rnn's (v2) Recurrence layers (its examples
simple-recurrent-network.lua and recurrent-time-series.lua build on them), against numpy:
LinearRNN h[t] = sigmoid(W [x[t]; h[t-1]] + b), LookupRNN h[t] = sigmoid(L[x[t]] + V h[t-1] + c),
h[0] = 0, index 0 a zero row (LookupTableMaskZero); the gradient by finite differences."""
from __future__ import annotations

import numpy as np
import pytest

import luabridge


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def test_linear_rnn_sequence_matches_numpy(lua):
    got = lua.execute("""
      require 'rnn'
      torch.manualSeed(3)
      local rnn = nn.LinearRNN(3, 4)
      local seq = nn.Sequencer(rnn)
      local xs = {}
      for t = 1, 3 do xs[t] = torch.randn(2, 3) end
      local ys = seq:forward(xs)
      local lin = rnn.recurrentModule:get(2)
      local out, x = {}, {}
      for t = 1, 3 do out[t] = ys[t]:totable(); x[t] = xs[t]:totable() end
      return lin.weight:totable(), lin.bias:totable(), x, out, tostring(rnn)""")
    W, b, xs, outs, name = got
    W = np.array([list(r.values()) for r in W.values()])
    b = np.array(list(b.values()))
    h = np.zeros((2, 4))
    for t in range(1, 4):
        x = np.array([list(r.values()) for r in xs[t].values()])
        h = sigmoid(np.concatenate([x, h], axis=1) @ W.T + b)
        y = np.array([list(r.values()) for r in outs[t].values()])
        np.testing.assert_allclose(y, h, rtol=1e-10, atol=1e-12)
    assert W.shape == (4, 7) and name == "nn.LinearRNN(3 -> 4)"


def test_lookup_rnn_sequence_matches_numpy_with_masked_zero(lua):
    got = lua.execute("""
      require 'rnn'
      torch.manualSeed(5)
      local rnn = nn.LookupRNN(6, 3)
      local seq = nn.Sequencer(rnn)
      local xs = {torch.LongTensor{2, 0}, torch.LongTensor{5, 1}, torch.LongTensor{6, 6}}
      local ys = seq:forward(xs)
      local lookup = rnn.recurrentModule:get(1):get(1)
      local lin = rnn.recurrentModule:get(1):get(2)
      local out = {}
      for t = 1, 3 do out[t] = ys[t]:totable() end
      return lookup.weight:totable(), lin.weight:totable(), lin.bias:totable(), out, tostring(rnn)""")
    L, V, c, outs, name = got
    L = np.array([list(r.values()) for r in L.values()])
    assert L.shape == (7, 3) and not L[0].any()
    V = np.array([list(r.values()) for r in V.values()])
    c = np.array(list(c.values()))
    idx = [[2, 0], [5, 1], [6, 6]]
    h = np.zeros((2, 3))
    for t in range(3):
        emb = np.array([L[i] for i in idx[t]])  # LookupTableMaskZero: nindex+1 rows, row 0 (index 0) zero
        h = sigmoid(emb + h @ V.T + c)
        y = np.array([list(r.values()) for r in outs[t + 1].values()])
        np.testing.assert_allclose(y, h, rtol=1e-10, atol=1e-12)
    assert name == "nn.LookupRNN(6 -> 3)"


def test_linear_rnn_gradient_by_finite_differences(lua):
    err = lua.execute("""
      require 'rnn'
      torch.manualSeed(7)
      local seq = nn.Sequencer(nn.LinearRNN(2, 3, nn.Tanh()))
      local xs = {torch.randn(2, 2), torch.randn(2, 2)}
      local gs = {torch.randn(2, 3), torch.randn(2, 3)}
      local function loss()
        local ys = seq:forward(xs)
        return ys[1]:dot(gs[1]) + ys[2]:dot(gs[2])
      end
      loss()
      seq:zeroGradParameters()
      local gin = seq:backward(xs, gs)
      local worst = 0
      for t = 1, 2 do
        for i = 1, 2 do for j = 1, 2 do
          local v = xs[t][i][j]
          xs[t][i][j] = v + 1e-6; local up = loss()
          xs[t][i][j] = v - 1e-6; local down = loss()
          xs[t][i][j] = v
          worst = math.max(worst, math.abs((up - down) / 2e-6 - gin[t][i][j]))
        end end
      end
      return worst""")
    assert err < 1e-6


def test_bad_sizes_say_which_module(lua):
    with pytest.raises(luabridge.LuaError, match="nn.LinearRNN"):
        lua.execute("require 'rnn'; nn.LinearRNN('3', 4)")
    with pytest.raises(luabridge.LuaError, match="nn.LookupRNN"):
        lua.execute("require 'rnn'; nn.LookupRNN(nil, 4)")
