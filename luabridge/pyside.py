"""The Python functions that Lua calls, installed in every runtime as __luabridge_py: buffer
allocation and copies here, and those of the backends and of the file, image and plot modules.
Importing this module (luabridge/__init__.py does, at start-up) registers them all with the
runtime, which knows none of them."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from . import display_client, files, hdf5_files, image_ops, imaging, magick, matio_files, plotting, threads
from .backend import cuda, linalg, ufuncs
from .backend import cuda_nn  # noqa: F401  (registers the nn modules' device passes as CUDA ops)
from .memory import lua_list
from .runtime import provide_callbacks

if TYPE_CHECKING:
    from .runtime import Bridge


def callbacks(bridge: "Bridge") -> dict[str, Any]:
    """Buffer allocation, release and file mapping, and copies between CPU tensors or storages."""
    buffers = bridge.buffers

    def copy_tensor(dst: Any, src: Any) -> None:
        np.copyto(buffers.tensor_view(dst), buffers.tensor_view(src).reshape(lua_list(dst._sz)), casting="unsafe")

    def copy_storage(dst: Any, src: Any) -> None:
        d = buffers.storage_view(dst, dst._dt.name, 0, [dst._n], [1])
        s = buffers.storage_view(src, src._dt.name, 0, [src._n], [1])
        np.copyto(d, s, casting="unsafe")

    return {
        "alloc": buffers.alloc,
        "release": buffers.release,
        "map_file": buffers.map_file,
        "copy_tensor": copy_tensor,
        "copy_storage": copy_storage,
    }


for _module in (ufuncs, linalg, cuda, files, hdf5_files, imaging, image_ops, magick, matio_files, plotting, threads,
                display_client):
    provide_callbacks(_module.callbacks)
provide_callbacks(callbacks)
