"""Helpers for the nn layer tests: run modules on numpy arrays, check gradients numerically."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

import luabridge
from luabridge.core.runtime import bridge

from helpers import numeric_grad

_FORWARD = "function(m, x) return m:forward(x) end"
_BACKWARD = "function(m, x, g) m:zeroGradParameters(); return m:backward(x, g) end"


def module(code: str) -> Any:
    """The nn module that the Lua expression `code` makes (nn loaded first)."""
    luabridge.require("nn")
    return luabridge.eval(code)


def call(src: str, *args: Any) -> Any:
    """Calls the Lua function `src` with args; a Lua error raises luabridge.LuaError."""
    return bridge().call(luabridge.eval(src), *args)


def lua_tensor(x: np.ndarray) -> Any:
    return luabridge.from_numpy(x)


def forward(m: Any, x: Any) -> np.ndarray:
    """m:forward(x) as a numpy copy; x is a numpy array (shared with Lua) or a Lua tensor."""
    t = lua_tensor(x) if isinstance(x, np.ndarray) else x
    return luabridge.to_numpy(call(_FORWARD, m, t)).copy()


def backward(m: Any, x: Any, g: np.ndarray) -> np.ndarray:
    t = lua_tensor(x) if isinstance(x, np.ndarray) else x
    return luabridge.to_numpy(call(_BACKWARD, m, t, lua_tensor(g))).copy()


def field(m: Any, name: str) -> np.ndarray:
    """A module's tensor field as a numpy view (writes reach the module)."""
    return luabridge.to_numpy(m[name])


def check_gradients(m: Any, x: np.ndarray, params: Sequence[str] = (), rng: Any = None,
                    tol: float = 1e-6) -> None:
    """gradInput and the named parameter gradients of m at x against central differences of
    the loss sum(forward(x) * g) for a random g (x must be a contiguous float64 array)."""
    rng = rng or np.random.default_rng(0)
    t = lua_tensor(x)
    g = rng.standard_normal(forward(m, t).shape)

    def loss() -> float:
        return float((forward(m, t) * g).sum())

    analytic = backward(m, t, g)
    grads = {p: field(m, "grad" + p[0].upper() + p[1:]).copy() for p in params}
    np.testing.assert_allclose(analytic, numeric_grad(loss, x), atol=tol, rtol=1e-5)
    for p in params:
        np.testing.assert_allclose(grads[p], numeric_grad(loss, field(m, p)), atol=tol, rtol=1e-5)


def pair(a: np.ndarray, b: np.ndarray) -> Any:
    """The Lua table {a, b} of tensors sharing the arrays' memory."""
    return luabridge.eval("function(a, b) return {a, b} end")(lua_tensor(a), lua_tensor(b))


def check_pair_gradients(m: Any, a: np.ndarray, b: np.ndarray, params: Sequence[str] = (),
                         rng: Any = None, tol: float = 1e-6) -> None:
    """As check_gradients for a module taking the table {a, b}; gradInput is {da, db}."""
    rng = rng or np.random.default_rng(0)
    t = pair(a, b)
    g = rng.standard_normal(forward(m, t).shape)

    def loss() -> float:
        return float((forward(m, t) * g).sum())

    grads = call(_BACKWARD, m, t, lua_tensor(g))
    da, db = (luabridge.to_numpy(grads[i]).copy() for i in (1, 2))
    pgrads = {p: field(m, "grad" + p[0].upper() + p[1:]).copy() for p in params}
    np.testing.assert_allclose(da, numeric_grad(loss, a), atol=tol, rtol=1e-5)
    np.testing.assert_allclose(db, numeric_grad(loss, b), atol=tol, rtol=1e-5)
    for p in params:
        np.testing.assert_allclose(pgrads[p], numeric_grad(loss, field(m, p)), atol=tol, rtol=1e-5)
