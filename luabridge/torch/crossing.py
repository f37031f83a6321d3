"""Tensors crossing between PyTorch and a Lua module: torch tensors (and nested lists of them) as
Lua tensors and tables over the same memory, and Lua results as cached torch views.

A Lua tensor made here holds its torch tensor's memory through the buffer registry (a numpy
array over it), so that memory outlives the torch tensor for as long as Lua keeps the tensor.
"""
from __future__ import annotations

from typing import Any, Union

import torch

from ..dtypes import TYPE_OF_DTYPE
from .. import from_numpy, to_numpy
from ..interop import _canonicalise_nans
from ..memory import split_address
from ..proxy import wrap
from ..runtime import Bridge

# The shape of a nested input or output: None for a tensor, a tuple of shapes for a list.
Spec = Union[None, tuple]

_TYPE_NAMES: dict[torch.dtype, str] = {}   # torch dtype -> torch7 type name ('Double')


def type_name(dtype: torch.dtype) -> str:
    """The torch7 element type name of a torch dtype, or TypeError naming it."""
    name = _TYPE_NAMES.get(dtype)
    if name is None:
        try:
            name = TYPE_OF_DTYPE[torch.empty(0, dtype=dtype).numpy().dtype]
        except (TypeError, KeyError):
            raise TypeError(f"LuaModule: Lua tensors have no element type for {dtype}") from None
        _TYPE_NAMES[dtype] = name
    return name


def flatten(x: Any, leaves: list[torch.Tensor]) -> Spec:
    """Appends x's tensors to leaves, in order; returns x's shape (see Spec)."""
    if isinstance(x, torch.Tensor):
        leaves.append(x)
        return None
    if isinstance(x, (list, tuple)):
        return tuple(flatten(v, leaves) for v in x)
    raise TypeError(f"LuaModule takes torch tensors or nested lists/tuples of them, got {type(x).__name__}")


def unflatten(leaves: tuple, spec: Spec) -> Any:
    """The nested lists that flatten took apart (Lua tables come back as lists)."""
    if spec is None:
        return leaves[0]
    it = iter(leaves)

    def build(s: Spec) -> Any:
        return next(it) if s is None else [build(c) for c in s]

    return build(spec)


def lua_tensor(b: Bridge, make: Any, x: torch.Tensor) -> Any:
    """A Lua tensor over x's memory (CPU only); make is luamodule.lua's M.tensor."""
    if x.device.type != "cpu":
        raise TypeError(f"LuaModule: tensors on {x.device} are not supported (LuaModule runs on the CPU)")
    name = type_name(x.dtype)
    x = x.detach()
    if x.numel() == 0:
        return from_numpy(x.numpy())
    shape, strides = x.shape, x.stride()
    array = x.numpy()
    _canonicalise_nans(array)
    if x.is_contiguous():
        span, extent = array, array.size
    else:   # the memory x spans, from its first element (torch strides are never negative)
        extent = 1 + sum((n - 1) * s for n, s in zip(shape, strides))
        span = torch.as_strided(x, (extent,), (1,)).numpy()
    buffer_id = b.buffers.register(span)
    if not shape:   # 0-dim: one element, as a 1-D tensor (torch7 has no 0-dim tensors)
        shape, strides = (1,), (1,)
    return make(name, buffer_id, *split_address(x.data_ptr()), extent, len(shape), *shape, *strides)

def lua_value(b: Bridge, make: Any, leaves: tuple, spec: Spec) -> Any:
    """The Lua value (tensor or nested tables) for leaves laid out as spec."""
    if spec is None:
        return lua_tensor(b, make, leaves[0])
    it = iter(leaves)

    def build(s: Spec) -> Any:
        return lua_tensor(b, make, next(it)) if s is None else b.lua.table_from([build(c) for c in s])

    return build(spec)


class Views:
    """Torch views of a Lua value's tensors, rebuilt only when Lua says they moved."""

    __slots__ = ("leaves", "spec")

    def __init__(self) -> None:
        self.leaves: list[torch.Tensor] = []
        self.spec: Spec = None

    def update(self, value: Any, moved: bool, what: str) -> None:
        if not moved:
            return
        leaves: list = []
        self.spec = _proxy_spec(wrap(value), leaves, what)
        self.leaves = [torch.from_numpy(to_numpy(t)) for t in leaves]

    def copies(self) -> tuple[torch.Tensor, ...]:
        return tuple(t.clone() for t in self.leaves)


def _proxy_spec(value: Any, leaves: list, what: str) -> Spec:
    """flatten for wrapped Lua values (tensor proxies, lists of them); `what` names the value."""
    if isinstance(value, list):
        return tuple(_proxy_spec(v, leaves, what) for v in value)
    if value is None or isinstance(value, (int, float, str, dict)):
        raise TypeError(f"LuaModule: the Lua module's {what} holds {value!r}, not a tensor or a table of tensors")
    leaves.append(value)
    return None

