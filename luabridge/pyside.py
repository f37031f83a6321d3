"""The Python functions that Lua calls: buffer allocation and numpy work over shared memory."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .dtypes import DTYPES

if TYPE_CHECKING:
    from .runtime import Bridge


def lua_list(table: Any) -> list:
    """A 1-based Lua array as a Python list."""
    return [table[i] for i in range(1, len(table) + 1)]


def tensor_view(bridge: "Bridge", t: Any) -> np.ndarray:
    """A numpy view of a CPU Lua tensor (sharing memory; it keeps the buffer alive)."""
    sizes = lua_list(t._sz)
    if not t._st:
        return np.empty(sizes or (0,), dtype=DTYPES[t._dt.name])
    return storage_view(bridge, t._st, t._dt.name, t._off, sizes, lua_list(t._str))


def storage_view(bridge: "Bridge", st: Any, type_name: str, offset: int, sizes, strides) -> np.ndarray:
    """A view of elements of a storage (a view storage sits at _baseoff into its root's buffer)."""
    return bridge.buffers.view(st._id, type_name, offset + st._baseoff, sizes, strides)


# Modules that add callbacks: each has callbacks(bridge) -> dict of name -> function.
PROVIDERS = ("luabridge.backend.ufuncs", "luabridge.backend.linalg", "luabridge.backend.cuda", "luabridge.files", "luabridge.imaging",
             "luabridge.image_ops", "luabridge.plotting")


def table_for(bridge: "Bridge") -> Any:
    """The table of callbacks installed in Lua as __luabridge_py."""
    import importlib

    def copy_tensor(dst: Any, src: Any) -> None:
        np.copyto(tensor_view(bridge, dst), tensor_view(bridge, src).reshape(lua_list(dst._sz)), casting="unsafe")

    def copy_storage(dst: Any, src: Any) -> None:
        d = storage_view(bridge, dst, dst._dt.name, 0, [dst._n], [1])
        s = storage_view(bridge, src, src._dt.name, 0, [src._n], [1])
        np.copyto(d, s, casting="unsafe")

    funcs = {
        "alloc": bridge.buffers.alloc,
        "release": bridge.buffers.release,
        "map_file": bridge.buffers.map_file,
        "copy_tensor": copy_tensor,
        "copy_storage": copy_storage,
    }
    for name in PROVIDERS:
        funcs.update(importlib.import_module(name).callbacks(bridge))
    return bridge.lua.table_from(funcs)
