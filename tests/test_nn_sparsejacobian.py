"""nn.SparseJacobian: gradient checks for modules with sparse (index, value) inputs. A small
sparse affine module defined here gives exact Jacobians computed in numpy; variants with a
deliberately wrong backward must be caught."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import luabridge
from luabridge.core.runtime import bridge

# y = sum_k W[:, idx_k] * val_k + b for an nnz x 2 input of (idx, val) rows. `bad` breaks one of
# the backward methods: 'input' doubles gradInput, 'weight' halves gradWeight, 'bias' skips gradBias
# (accUpdateGradParameters, nn.Module's default, goes through accGradParameters); 'table' returns
# a table as gradInput.
_MODULES = r"""
if torch.getmetatable('pysj.SparseAffine') then return end
local M, parent = torch.class('pysj.SparseAffine', 'nn.Module')
function M:__init(nIn, nOut, bad)
  parent.__init(self)
  self.weight, self.gradWeight = torch.randn(nOut, nIn), torch.zeros(nOut, nIn)
  self.bias, self.gradBias = torch.randn(nOut), torch.zeros(nOut)
  self.bad = bad
end
local function columns(self, input) return self.weight:index(2, input:select(2, 1):long()) end
function M:updateOutput(input)
  self.output:resize(self.bias:size()):copy(self.bias):addmv(columns(self, input), input:select(2, 2))
  return self.output
end
function M:updateGradInput(input, g)
  if self.bad == 'table' then self.gradInput = {}; return self.gradInput end
  self.gradInput:resizeAs(input):zero()
  self.gradInput:select(2, 2):mv(columns(self, input):t(), g)
  if self.bad == 'input' then self.gradInput:mul(2) end
  return self.gradInput
end
function M:accGradParameters(input, g, scale)
  scale = scale or 1
  local wscale = self.bad == 'weight' and scale / 2 or scale
  for k = 1, input:size(1) do
    self.gradWeight:select(2, input[k][1]):add(wscale * input[k][2], g)
  end
  if self.bad ~= 'bias' then self.gradBias:add(scale, g) end
end
"""


def _make(n_in: int, n_out: int, bad: str | None = None) -> Any:
    luabridge.require("nn")
    luabridge.execute(_MODULES)
    return luabridge.eval("function(a, b, bad) return pysj.SparseAffine(a, b, bad) end")(n_in, n_out, bad)


def _sparse_input(rng: np.random.Generator, n_in: int, nnz: int, transposed: bool = False) -> Any:
    idx = rng.choice(n_in, size=nnz, replace=False) + 1.0
    rows = np.stack([idx, rng.uniform(-2, 2, nnz)], axis=1)
    if transposed:  # the same nnz x 2 data as a non-contiguous view of a 2 x nnz tensor
        transpose = luabridge.eval("function(t) return t:t() end")
        return transpose(luabridge.from_numpy(np.ascontiguousarray(rows.T)))
    return luabridge.from_numpy(rows)


def _np(t: Any) -> np.ndarray:
    return np.array(luabridge.to_numpy(t), dtype=np.float64)


_sjac = "nn.SparseJacobian"


@pytest.mark.parametrize("transposed", [False, True])
def test_input_jacobians_match_numpy(rng: np.random.Generator, transposed: bool) -> None:
    m = _make(7, 4)
    x = _sparse_input(rng, 7, 5, transposed)
    before = _np(x).copy()
    w = _np(m.weight)
    expected = w[:, before[:, 0].astype(int) - 1].T  # d y_j / d val_k = W[j, idx_k]
    for how in ("forward", "backward"):
        jac = _np(luabridge.eval(f"function(m, x) return {_sjac}.{how}(m, x) end")(m, x))
        np.testing.assert_allclose(jac, expected, atol=1e-6 if how == "forward" else 1e-12)
        np.testing.assert_array_equal(_np(x), before)  # values restored, indices untouched


def test_parameter_jacobian_matches_numpy(rng: np.random.Generator) -> None:
    m = _make(6, 3)
    x = _sparse_input(rng, 6, 4)
    rows = _np(x)
    dense = np.zeros(6)
    dense[rows[:, 0].astype(int) - 1] = rows[:, 1]
    # d y_j / d W[a, b] = [a == j] * dense[b]; rows of the Jacobian follow W's row-major order
    expected = np.einsum("aj,b->abj", np.eye(3), dense).reshape(18, 3)
    for how, args in (("forward", "m.weight"), ("backward", "m.weight, m.gradWeight")):
        jac = _np(luabridge.eval(f"function(m, x) return {_sjac}.{how}(m, x, {args}) end")(m, x))
        np.testing.assert_allclose(jac, expected, atol=1e-6 if how == "forward" else 1e-12)


def _errors(m: Any, x: Any) -> list[float]:
    run = luabridge.eval(f"""function(m, x)
      local sj = {_sjac}
      return sj.testJacobian(m, x), sj.testJacobianParameters(m, x, m.weight, m.gradWeight),
        sj.testJacobianParameters(m, x, m.bias, m.gradBias),
        sj.testJacobianUpdateParameters(m, x, m.weight), sj.testJacobianUpdateParameters(m, x, m.bias)
    end""")
    return list(run(m, x))


def test_correct_module_has_tiny_errors(rng: np.random.Generator) -> None:
    x = _sparse_input(rng, 8, 5)
    indices = _np(x)[:, 0].copy()
    errors = _errors(_make(8, 3), x)
    assert max(errors) < 1e-5, errors
    np.testing.assert_array_equal(_np(x)[:, 0], indices)  # only the value column is randomised
    assert np.all(np.abs(_np(x)[:, 1]) <= 2)


@pytest.mark.parametrize("bad, wrong", [("input", [0]), ("weight", [1, 3]), ("bias", [2, 4])])
def test_wrong_backward_is_caught(rng: np.random.Generator, bad: str, wrong: list[int]) -> None:
    errors = _errors(_make(8, 3, bad), _sparse_input(rng, 8, 5))
    for i, err in enumerate(errors):
        assert err > 0.1 if i in wrong else err < 1e-5, (bad, errors)


def test_io_and_all_update(rng: np.random.Generator) -> None:
    m = _make(5, 2)
    x = _sparse_input(rng, 5, 3)
    ferr, berr = luabridge.eval(f"function(m, x) return {_sjac}.testIO(m, x) end")(m, x)
    assert ferr == 0 and berr == 0
    all_update = luabridge.eval(
        f"function(m, x) return {_sjac}.testAllUpdate(m, x, 'weight', 'gradWeight') end"
    )
    errs = all_update(m, x)
    assert max(errs.values()) < 1e-10


@pytest.mark.parametrize("make_input", ["torch.randn(4)", "torch.randn(3, 1)", "{}"])
def test_rejects_non_sparse_input(make_input: str) -> None:
    m = _make(4, 2)
    with pytest.raises(luabridge.LuaError, match=r"nn.SparseJacobian.testJacobian: expected a 2-D input"):
        bridge().call(luabridge.eval(f"function(m) return {_sjac}.testJacobian(m, {make_input}) end"), m)


def test_rejects_gradinput_not_shaped_like_input(rng: np.random.Generator) -> None:
    m = _make(4, 2, "table")
    x = _sparse_input(rng, 4, 3)
    message = r"gradInput of pysj.SparseAffine must be a tensor shaped like its 3x2 input, got table"
    with pytest.raises(luabridge.LuaError, match=message):
        bridge().call(luabridge.eval(f"function(m, x) return {_sjac}.backward(m, x) end"), m, x)
