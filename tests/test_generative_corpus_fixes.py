"""Fixes the generative slice of the corpus needed (tools/corpus/generative.toml), each against an
independent reference: numpy float64 and torch7's semantics read from torch/nn's sources."""
from __future__ import annotations

import numpy as np
import pytest

from nn_layers_check import backward, forward, module


@pytest.fixture
def rng():
    return np.random.default_rng(23)


def test_mean_with_negative_n_input_dims(rng):
    # waifu2x's squeeze-and-excitation block: nn.Mean(-1, -1) twice, a global average pool; torch/nn's
    # Sum stores nInputDims unchecked and a negative dimension counts from the end
    m = module("nn.Sequential():add(nn.Mean(-1, -1)):add(nn.Mean(-1, -1))")
    x = rng.standard_normal((2, 5, 4, 3))
    np.testing.assert_allclose(forward(m, x), x.mean(axis=(2, 3)), rtol=1e-12)
    g = rng.standard_normal((2, 5))
    np.testing.assert_allclose(backward(m, x, g), np.broadcast_to(g[:, :, None, None] / 12, x.shape), rtol=1e-12)
    one = module("nn.Sum(-1, -1)")
    np.testing.assert_allclose(forward(one, x), x.sum(axis=3), rtol=1e-12)


def test_join_table_copies_inputs_of_other_shapes_into_their_slices(rng):
    # torch/nn's JoinTable sizes the output from input[1] and copies every input into its slice
    # (Tensor:copy needs equal element counts only): icml2016's generator joins noise Bx16x1x1 with
    # text features Bx32 along dim 2
    m = module("nn.JoinTable(2)")
    from nn_layers_check import call
    import luabridge
    z = rng.standard_normal((3, 4, 1, 1))
    t = rng.standard_normal((3, 5))
    pair = call("function(a, b) return {a, b} end", luabridge.from_numpy(z), luabridge.from_numpy(t))
    out = luabridge.to_numpy(call("function(m, x) return m:forward(x) end", m, pair)).copy()
    assert out.shape == (3, 9, 1, 1)
    np.testing.assert_array_equal(out[:, :4, 0, 0], z[:, :, 0, 0])
    np.testing.assert_array_equal(out[:, 4:, 0, 0], t)
    g = rng.standard_normal((3, 9, 1, 1))
    grads = call("function(m, x, g) return m:backward(x, g) end", m, pair, luabridge.from_numpy(g))
    gz, gt = luabridge.to_numpy(grads[1]).copy(), luabridge.to_numpy(grads[2]).copy()
    assert gz.shape == (3, 4, 1, 1) and gt.shape == (3, 5)
    np.testing.assert_array_equal(gz[:, :, 0, 0], g[:, :4, 0, 0])
    np.testing.assert_array_equal(gt, g[:, 4:, 0, 0])
    # an input that cannot fill its slice is still refused by name
    bad = call("function(a, b) return {a, b} end", luabridge.from_numpy(z), luabridge.from_numpy(rng.standard_normal((2, 5))))
    with pytest.raises(luabridge.LuaError, match=r"input\[2\] of size 2x5 cannot be joined to input\[1\] of size 3x4x1x1"):
        call("function(m, x) return m:forward(x) end", m, bad)
