"""Zero-copy exchange between numpy / DLPack producers and Lua tensors. It takes Lua tensors
and arrays only: proxies are unwrapped by proxy.py before they reach it."""
from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from .dtypes import DTYPES, TYPE_OF_DTYPE
from .memory import split_address
from .runtime import bridge
from .runtime import luajit21 as lupa


def memory_span(arr: Any, xp: Any = np, address: Any = lambda a: a.ctypes.data) -> tuple[Any, int, list[int]]:
    """A 1-D array over the memory arr spans, arr's element offset in it, and its element strides
    (arr an array of the module xp: numpy, or CuPy for device memory)."""
    if arr.ndim == 0:   # indexing a 0-d array gives a scalar, not a view: span it as shape (1,)
        arr = arr.reshape(1)
    item = arr.itemsize
    for s in arr.strides:
        if s % item:
            raise ValueError(f"from_numpy: byte stride {s} is not a multiple of the item size {item}; "
                             "pass np.ascontiguousarray(arr)")
    strides = [s // item for s in arr.strides]
    if arr.size == 0:
        return xp.zeros(1, dtype=arr.dtype), 0, strides
    # the lowest-addressed element starts the span: flip the dims that run backwards
    low = arr[tuple(slice(None, None, -1) if s < 0 else slice(None) for s in arr.strides)]
    extent = 1 + sum((n - 1) * abs(s) for n, s in zip(arr.shape, strides))
    span = xp.lib.stride_tricks.as_strided(low, shape=(extent,), strides=(item,))
    offset = (address(arr) - address(span)) // item
    return span, offset, strides


def from_numpy(arr: np.ndarray) -> Any:
    """A Lua tensor sharing arr's memory (any strides and offset).

    Read-only arrays are refused: Lua code may write to any tensor it holds. Pass a writable
    copy (``arr.copy()``) instead.
    """
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"from_numpy expects a numpy array, got {type(arr).__name__}")
    if arr.dtype == np.bool_:
        raise TypeError("from_numpy: bool arrays are not shared; pass arr.view(np.uint8) for a ByteTensor")
    dtype = arr.dtype.newbyteorder("=") if arr.dtype.byteorder not in "=|" else arr.dtype
    if dtype != arr.dtype or dtype not in TYPE_OF_DTYPE:
        raise TypeError(f"from_numpy: unsupported dtype {arr.dtype} (supported: "
                        + ", ".join(str(d) for d in DTYPES.values()) + ", native byte order)")
    if not arr.flags.writeable:
        raise ValueError("from_numpy: the array is read-only; Lua tensors are writable, so pass a copy")
    canonicalise_nans(arr)
    b = bridge()
    span, offset, strides = memory_span(arr)
    g = b.lua.globals()
    if g.torch is None:
        b.call(g.require, "torch")
    # the storage holds arr's memory until it is collected: count it toward the collector's
    # threshold like an allocation, or arrays shared while Lua allocates nothing pile up
    b.call(b.module("torch.core.memory").account, span.nbytes)
    buffer_id = b.buffers.register(span)
    type_name = TYPE_OF_DTYPE[arr.dtype]
    storage = g.torch._storageFromBuffer(type_name, buffer_id, *split_address(span.ctypes.data), span.size)
    return from_array(b, g.torch[type_name + "Tensor"], storage, offset, arr.shape, strides)


def canonicalise_nans(arr: np.ndarray) -> None:
    """Rewrites every NaN in a float array as the standard NaN, in place.

    LuaJIT does not canonicalise the doubles it reads from FFI memory, and it tags its own values
    inside NaN bit patterns: a NaN whose payload bits look like a tag would reach Lua as a forged
    object and crash the process. Only NaN payload bits change; one min() pass finds whether any
    NaN is there.
    """
    if arr.dtype.kind == "f" and arr.size and np.isnan(np.min(arr)):
        arr[np.isnan(arr)] = np.nan


def from_array(b: Any, constructor: Any, storage: Any, offset: int, shape: tuple, strides: list[int]) -> Any:
    """A Lua tensor (made by constructor) viewing storage with an array's layout (from memory_span)."""
    if 0 in shape and len(shape) == 1:
        return b.call(constructor, storage, 1, 0, 1)
    if len(shape) == 0:
        return b.call(constructor, storage, offset + 1, 1, 1)
    args = [x for pair in zip(shape, strides) for x in pair]
    return b.call(constructor, storage, offset + 1, *args)


class ArrayProvider(Protocol):
    """How Python sees the tensors of one device (an entry of DEVICES)."""

    dlpack_types: tuple[int, ...]           # the DLPack device types whose arrays it shares

    def view(self, t: Any) -> Any: ...      # a Lua tensor -> an array over its memory
    def to_host(self, x: Any) -> np.ndarray: ...   # an array of the device -> numpy
    def share(self, x: Any) -> Any: ...     # an array of the device -> a Lua tensor on its memory


class HostArrays:
    """CPU tensors seen from Python (DEVICES["cpu"]): numpy arrays over their memory, and numpy
    arrays (or CPU DLPack producers) shared in."""

    dlpack_types = (1,)   # kDLCPU

    def view(self, t: Any) -> np.ndarray:
        return bridge().buffers.tensor_view(t)

    def to_host(self, x: Any) -> np.ndarray:
        return np.asarray(x)

    def share(self, x: Any) -> Any:
        if isinstance(x, np.ndarray):
            return from_numpy(x)
        try:
            arr = np.from_dlpack(x)
        except (RuntimeError, BufferError, TypeError) as e:   # numpy's word for a dtype it lacks
            raise TypeError(f"from_dlpack: a {type(x).__name__} of dtype {getattr(x, 'dtype', '?')} "
                            f"cannot be shared ({e})") from e
        return from_numpy(arr)


# The provider of each device, by the name Lua tensors answer as _device (none for the CPU);
# the CUDA backend adds its own at start-up (providers/torch_cuda/arrays.py).
DEVICES: dict[str, ArrayProvider] = {"cpu": HostArrays()}


def arrays_of(t: Any) -> ArrayProvider:
    """The provider serving Lua tensor t (its device's entry of DEVICES)."""
    return DEVICES[t._device or "cpu"]


def to_numpy(t: Any) -> Any:
    """The array sharing a Lua tensor's memory: numpy's for a CPU tensor, the CUDA array
    module's (CuPy; numpy standing in) for a CUDA one. (luabridge.to_numpy takes proxies too.)"""
    if lupa.lua_type(t) is None:
        raise TypeError(f"interop.to_numpy expects a Lua tensor, got {type(t).__name__} "
                        "(luabridge.to_numpy unwraps tensor proxies)")
    bridge().check_owned(t)
    return arrays_of(t).view(t)


def to_host(t: Any) -> np.ndarray:
    """A numpy array with a Lua tensor's values: its memory for a CPU tensor, a host copy for a
    tensor on a device."""
    return arrays_of(t).to_host(to_numpy(t))


def from_dlpack(x: Any) -> Any:
    """A Lua tensor sharing the memory of any DLPack producer (numpy, CuPy, PyTorch, JAX)."""
    device_type, _ = x.__dlpack_device__()
    for arrays in DEVICES.values():
        if device_type in arrays.dlpack_types:
            return arrays.share(x)
    raise TypeError(f"from_dlpack: no luabridge device holds arrays of DLPack device type {device_type}")
