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
