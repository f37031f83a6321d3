"""Buffer allocation, release and file mapping, and copies between CPU tensors or storages: the
callbacks of lua/torch/core/memory.lua and the CPU copy kernels (registered by providers/__init__.py)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.memory import lua_list

if TYPE_CHECKING:
    from ..core.runtime import Bridge


def callbacks(bridge: "Bridge") -> dict[str, Any]:
    """Buffer allocation, release and file mapping, and copies between CPU tensors or storages."""
    buffers = bridge.buffers

    # the views go when the copy returns, and its Lua callers (the op `copy`, Storage.copy)
    # bump dst's write version: they mark nothing escaped
    def copy_tensor(dst: Any, src: Any) -> None:
        np.copyto(buffers.tensor_view(dst, escape=False),
                  buffers.tensor_view(src, escape=False).reshape(lua_list(dst._sz)), casting="unsafe")

    def copy_storage(dst: Any, src: Any) -> None:
        d = buffers.storage_view(dst, dst._dt.name, 0, [dst._n], [1], escape=False)
        s = buffers.storage_view(src, src._dt.name, 0, [src._n], [1], escape=False)
        np.copyto(d, s, casting="unsafe")

    return {
        "alloc": buffers.alloc,
        "release": buffers.release,
        "map_file": buffers.map_file,
        "copy_tensor": copy_tensor,
        "copy_storage": copy_storage,
        "buffer_viewed": buffers.viewed,
    }

