"""The graph executor's elementwise closures (lua/luabridge/graph/ops.lua, K.ewise) on contiguous
CPU operands: written-out code up to K.UNROLL elements, the CPU backend's ops above it, each
with one-element operands broadcast as tinyflow's scalars; checked against numpy in float64."""
from __future__ import annotations

import numpy as np
import pytest

V = 1.5  # the scalar of the *_scalar ops

# name -> (inputs, numpy reference); inputs drawn positive where the op needs it
OPS = {
    "add": (2, lambda a, b: a + b), "sub": (2, lambda a, b: a - b), "mul": (2, lambda a, b: a * b),
    "div": (2, lambda a, b: a / b), "pow": (2, lambda a, b: a ** b),
    "equal": (2, lambda a, b: (a == b).astype(np.float64)),
    "add_scalar": (1, lambda a: a + V), "sub_scalar": (1, lambda a: a - V), "rsub_scalar": (1, lambda a: V - a),
    "mul_scalar": (1, lambda a: a * V), "div_scalar": (1, lambda a: a / V), "rdiv_scalar": (1, lambda a: V / a),
    "pow_scalar": (1, lambda a: a ** V), "rpow_scalar": (1, lambda a: V ** a), "square": (1, lambda a: a * a),
    "exp": (1, np.exp), "log": (1, np.log), "sqrt": (1, np.sqrt), "copy": (1, lambda a: a),
}

_RUN = """function(name, y, a, b, v)
  local K = require 'luabridge.graph.ops'
  local xs = {a, b}
  K.ewise(name, y, xs, v)()
  return y
end"""


def _operand(rng, n, dtype):
    # positive and away from 0 (log, sqrt, pow, division), a few repeats for equal
    x = rng.uniform(0.5, 2.0, n)
    x[::3] = 1.0
    return x.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [5, 40])   # below and above K.UNROLL
@pytest.mark.parametrize("name", sorted(OPS))
def test_ewise_matches_numpy(lua, rng, name, n, dtype):
    run = lua.eval(_RUN)
    nin, ref = OPS[name]
    # each input full-sized or broadcast from one element (every combination)
    for sizes in ([(n, n), (1, n), (n, 1), (1, 1)] if nin == 2 else [(n,), (1,)]):
        xs = [_operand(rng, m, dtype) for m in sizes]
        a, b = [lua.from_numpy(x) for x in xs] + [None] * (2 - nin)
        got = lua.to_numpy(run(name, lua.from_numpy(np.zeros(n, dtype)), a, b, V))
        want = ref(*[np.broadcast_to(x.astype(np.float64), (n,)) for x in xs])
        tol = 1e-5 if dtype == np.float32 else 1e-12
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=f"{name} {sizes}")


def test_fill_and_in_place(lua, rng):
    run = lua.eval(_RUN)
    y = lua.from_numpy(np.zeros(30))
    np.testing.assert_array_equal(lua.to_numpy(run("fill", y, None, None, 2.5)), np.full(30, 2.5))
    x = rng.uniform(0.5, 2.0, 30)
    t = lua.from_numpy(x.copy())   # y is the first input: the planner's in-place ops
    np.testing.assert_allclose(lua.to_numpy(run("rsub_scalar", t, t, None, V)), V - x, rtol=1e-12)
