"""Where a session's buffers live: numpy arrays behind CPU Lua tensors, or the CUDA backend's
arrays (CuPy; numpy standing in via luabridge.cuda.use_array_module) behind CUDA tensors, reached
through the CUDA entry of core/interop.py's DEVICES (the graph imports no provider)."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable

import numpy as np

from ..core.interop import DEVICES, from_numpy
from ..core.dtypes import CUDA_NAMES, TYPE_OF_DTYPE


@dataclass(frozen=True)
class Device:
    name: str                       # "cpu" or "cuda"
    xp: Any                         # the array module of the buffers
    share: Callable[[Any], Any]     # an array -> a Lua tensor over its memory
    to_host: Callable[[Any], np.ndarray]
    fusion: bool = False            # executors fuse elementwise groups (graph/passes/fuse.py)
    # (group, evaluate) -> the group's kernel on this device's arrays; None: the CPU's Lua loops
    fused_kernel: Callable[[Any, Callable], Callable] | None = None

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
    from ..core.runtime import bridge
    arrays = DEVICES["cuda"]   # the CUDA provider's, registered at start-up
    try:
        xp = arrays.array_module()
    except RuntimeError as e:
        raise RuntimeError(f"Session({config!r}): {e}") from None
    b = bridge()
    b.call(b.lua.globals().require, "cutorch")
    b.call(b.lua.globals().require, "cunn")
    return Device("cuda", xp, arrays.share, arrays.to_host, fusion, arrays.fused_kernel)
