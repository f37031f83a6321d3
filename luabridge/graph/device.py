"""Where a session's buffers live: numpy arrays behind CPU Lua tensors, or the CUDA backend's
arrays (CuPy; numpy standing in via luabridge.backend.cuda.use_array_module) behind CUDA tensors."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable

import numpy as np

from ..interop import from_numpy
from ..dtypes import CUDA_NAMES, TYPE_OF_DTYPE


@dataclass(frozen=True)
class Device:
    name: str                       # "cpu" or "cuda"
    xp: Any                         # the array module of the buffers
    share: Callable[[Any], Any]     # an array -> a Lua tensor over its memory
    to_host: Callable[[Any], np.ndarray]
    fusion: bool = False            # executors fuse elementwise groups (graph/passes/fuse.py)

    def zeros(self, shape: tuple, dtype: Any) -> Any:
        return self.xp.zeros(shape, dtype=dtype)

    def lua_type(self, dtype: Any) -> str:
        """The Lua tensor type name of elements of dtype on this device."""
        name = TYPE_OF_DTYPE[np.dtype(dtype)]
        return f"torch.{name if self.name == 'cpu' else CUDA_NAMES[name]}Tensor"

    def upload(self, dst: Any, src: np.ndarray) -> None:
        if self.xp is np:
            np.copyto(dst, src)
        else:
            dst[...] = self.xp.asarray(src)


CPU = Device("cpu", np, from_numpy, np.asarray)


CONFIGS = ("cpu", "cpu fusion", "gpu", "gpu fusion")


def device_for(config: str) -> Device:
    """The device a session config names ("cpu", "cpu fusion", "gpu", "gpu fusion")."""
    if config not in CONFIGS:
        raise ValueError(f"Session: config must be one of {', '.join(map(repr, CONFIGS))}, got {config!r}")
    fusion = config.endswith(" fusion")
    if config.startswith("cpu"):
        return replace(CPU, fusion=fusion)
    from ..backend import cuda
    from ..runtime import bridge
    try:
        xp = cuda.array_module()
    except RuntimeError as e:
        raise RuntimeError(f"Session({config!r}): {e}") from None
    b = bridge()
    b.call(b.lua.globals().require, "cutorch")
    b.call(b.lua.globals().require, "cunn")
    return Device("cuda", xp, cuda.from_device_array, cuda.to_host, fusion)
