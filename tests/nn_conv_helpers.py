"""Shared helpers of the tests/test_nn_conv*.py files: Lua calls, numpy views, and a
finite-difference gradient check (float64, central differences) of any nn module."""
from typing import Any, Callable, Optional

import numpy as np

import luabridge
from luabridge.runtime import bridge


def lua_fn(code: str) -> Callable[..., Any]:
    fn = luabridge.eval(code)
    return lambda *args: bridge().call(fn, *args)


def T(a: np.ndarray) -> Any:
    return luabridge.from_numpy(a)


def N(t: Any) -> np.ndarray:
    return luabridge.to_numpy(t).copy()


def view(t: Any) -> np.ndarray:
    """A writable numpy view of a Lua tensor (shares its memory)."""
    return luabridge.to_numpy(t)


def module(expr: str) -> Any:
    """A module built by the Lua expression `expr` (nn loaded) (Double by default)."""
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
        flat = arr.reshape(-1) if arr.flags.c_contiguous else None
        assert flat is not None
        idx = rng.choice(flat.size, size=min(picks, flat.size), replace=False)
        for i in idx:
            old = flat[i]
            flat[i] = old + eps
            up = float((N(forward(m, tx)) * g).sum())
            flat[i] = old - eps
            down = float((N(forward(m, tx)) * g).sum())
            flat[i] = old
            num = (up - down) / (2 * eps)
            assert abs(num - analytic.reshape(-1)[i]) < atol * max(1.0, abs(num)), (name, i, num, analytic.reshape(-1)[i])


try:
    import torch as pytorch
    import torch.nn.functional as F
except ImportError:  # optional reference
    pytorch, F = None, None
