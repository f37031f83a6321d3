"""Shared helpers of the tests/test_nn_conv*.py files: Lua calls, numpy views, and a
finite-difference gradient check (float64, central differences) of any nn module."""
from typing import Any, Optional

import numpy as np

import luabridge
from helpers import N, T, lua_fn  # noqa: F401 - re-exported to the conv tests


def view(t: Any) -> np.ndarray:
    """A writable numpy view of a Lua tensor (shares its memory)."""
    return luabridge.to_numpy(t)


def module(expr: str) -> Any:
    """The module the Lua expression `expr` makes (nn loaded; Double by default)."""
    return lua_fn(f"function() require 'nn'; return {expr} end")()


forward = lua_fn("function(m, x) return m:forward(x) end")
backward = lua_fn("function(m, x, g) m:zeroGradParameters(); m:forward(x); return m:backward(x, g) end")
field = lua_fn("function(m, k) return m[k] end")
call = lua_fn("function(m, k, ...) return m[k](m, ...) end")


def fd_check(m: Any, x: np.ndarray, params: tuple = ("weight", "bias"), eps: float = 1e-6,
             picks: int = 40, rng: Optional[np.random.Generator] = None, atol: float = 1e-6) -> None:
    """Compares gradInput and the parameter gradients of module m at input x with central
    differences of sum(output * gradOutput), at up to `picks` random elements of each."""
    rng = rng or np.random.default_rng(0)
    x = np.array(x, dtype=np.float64)
    tx = T(x)
    out = N(forward(m, tx))
    g = rng.standard_normal(out.shape)
    gin = N(backward(m, tx, T(g)))
    grads = {p: N(field(m, "grad" + p[0].upper() + p[1:])) for p in params if field(m, p) is not None}
    targets = [("input", x, gin)] + [(p, view(field(m, p)), grads[p]) for p in grads]
    for name, arr, analytic in targets:
        assert arr.flags.c_contiguous, name   # perturbed in place through a flat view
        flat, want = arr.reshape(-1), analytic.reshape(-1)
        for i in rng.choice(flat.size, size=min(picks, flat.size), replace=False):
            old = flat[i]
            flat[i] = old + eps
            up = float((N(forward(m, tx)) * g).sum())
            flat[i] = old - eps
            down = float((N(forward(m, tx)) * g).sum())
            flat[i] = old
            num = (up - down) / (2 * eps)
            assert abs(num - want[i]) < atol * max(1.0, abs(num)), (name, i, num, want[i])

try:
    import torch as pytorch
    import torch.nn.functional as F
except ImportError:  # optional reference
    pytorch, F = None, None
