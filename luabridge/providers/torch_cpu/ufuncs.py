"""numpy's compiled ufunc inner loops, lent to the Lua side.

Elementwise math on Float and Double tensors (lua/torch/backend/cpu/pointwise.lua) runs numpy's own
SIMD inner loops on the shared memory: Lua asks once per (ufunc, signature) for the loop's
address and calls it through the LuaJIT FFI as numpy's ufunc machinery would,
``loop(args, dimensions, steps, data)``. No Python runs per call, so even small tensors gain.

The loop table is read from the ufunc's C structure (``PyUFuncObject``, part of numpy's public
C API) only after its counts and type table agree with what the ufunc reports in Python, and a
loop is lent only after a trial run on a few elements gives numpy's own answer. Anything odd
(another layout, a missing loop) lends nothing, and Lua keeps its own kernels.
``LUABRIDGE_UFUNC=lua`` lends nothing either.
"""
from __future__ import annotations

import ctypes
import os
from typing import TYPE_CHECKING, Any, Callable, Optional

import numpy as np

from ...core.memory import split_address

if TYPE_CHECKING:
    from ...core.runtime import Bridge

ENV_VAR = "LUABRIDGE_UFUNC"

# void loop(char **args, npy_intp const *dimensions, npy_intp const *steps, void *data)
_LOOP = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_ssize_t),
                         ctypes.POINTER(ctypes.c_ssize_t), ctypes.c_void_p)


class _UFuncObject(ctypes.Structure):
    """The leading fields of numpy's PyUFuncObject (numpy/ufuncobject.h)."""

    _fields_ = [
        ("head", ctypes.c_byte * object.__basicsize__),  # PyObject_HEAD
        ("nin", ctypes.c_int),
        ("nout", ctypes.c_int),
        ("nargs", ctypes.c_int),
        ("identity", ctypes.c_int),
        ("functions", ctypes.POINTER(ctypes.c_void_p)),
        ("data", ctypes.POINTER(ctypes.c_void_p)),
        ("ntypes", ctypes.c_int),
        ("reserved1", ctypes.c_int),
        ("name", ctypes.c_char_p),
        ("types", ctypes.POINTER(ctypes.c_char)),
    ]


def _struct_of(uf: np.ufunc) -> Optional[_UFuncObject]:
    """uf's C structure, if its layout is the one described above."""
    s = _UFuncObject.from_address(id(uf))
    # plain integers first: no pointer is followed unless they all agree
    if (s.nin, s.nout, s.nargs, s.ntypes) != (uf.nin, uf.nout, uf.nargs, uf.ntypes):
        return None
    if s.name is None or s.name.decode() != uf.__name__ or not s.types or not s.functions:
        return None
    for i, sig in enumerate(uf.types):
        chars = sig.replace("->", "")
        nums = [s.types[i * s.nargs + k][0] for k in range(s.nargs)]
        if len(chars) != s.nargs or nums != [np.dtype(c).num for c in chars]:
            return None
    return s


def _trial_inputs(sig: str) -> list[np.ndarray]:
    """Small inputs of sig's types, in every ufunc's domain (0.25 .. 0.95)."""
    ins = sig.split("->")[0]
    return [np.linspace(0.25, 0.95, 8 + k).astype(c)[:8] for k, c in enumerate(ins)]


def _agrees(uf: np.ufunc, sig: str, fn: Any, data: int) -> bool:
    """Runs the loop on a few elements and compares with calling the ufunc."""
    ins = _trial_inputs(sig)
    out = np.zeros(8, dtype=sig[-1])
    arrays = [*ins, out]
    args = (ctypes.c_void_p * len(arrays))(*[a.ctypes.data for a in arrays])
    dims = (ctypes.c_ssize_t * 1)(8)
    steps = (ctypes.c_ssize_t * len(arrays))(*[a.itemsize for a in arrays])
    fn(args, dims, steps, data or None)
    with np.errstate(all="ignore"):
        expected = uf(*ins, dtype=sig[-1] if sig[-1] != "?" else None)
    return bool(np.array_equal(out, expected, equal_nan=True))


def find_loop(name: str, signature: str) -> Optional[tuple[int, int]]:
    """The (function, data) addresses of numpy ufunc `name`'s loop for `signature` ('ff->f')."""
    if os.environ.get(ENV_VAR) == "lua":
        return None
    uf = getattr(np, name, None)
    if not isinstance(uf, np.ufunc) or signature not in uf.types:
        return None
    s = _struct_of(uf)
    if s is None:
        return None
    i = uf.types.index(signature)
    fn_addr, data = s.functions[i], s.data[i] if s.data else None
    if not fn_addr or not _agrees(uf, signature, _LOOP(fn_addr), data or 0):
        return None
    return fn_addr, data or 0


def callbacks(bridge: "Bridge") -> dict[str, Callable[..., Any]]:
    found: dict[tuple[str, str], Optional[tuple[int, int]]] = {}

    def ufunc_loop(name: str, signature: str) -> Optional[tuple[int, int, int, int]]:
        """Address halves (function high, low, data high, low) of a loop, or None."""
        key = (str(name), str(signature))
        if key not in found:
            found[key] = find_loop(*key)
        loop = found[key]
        return None if loop is None else (*split_address(loop[0]), *split_address(loop[1]))

    return {"ufunc_loop": ufunc_loop}
