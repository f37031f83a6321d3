"""Tensors crossing between PyTorch and a Lua module: torch tensors (and nested lists of them) as
Lua tensors and tables over the same memory, and Lua results as cached torch views.

A Lua tensor made here holds its torch tensor's memory through the buffer registry (a numpy
array over it), so that memory outlives the torch tensor for as long as Lua keeps the tensor.
"""
from __future__ import annotations

from typing import Any, Union

import numpy as np
import torch

from ..core.dtypes import TYPE_OF_DTYPE
from ..core.interop import canonicalise_nans, from_numpy
from ..core.memory import split_address
from ..core.proxy import to_numpy, wrap
from ..core.runtime import Bridge

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


def tensor_args(b: Bridge, x: torch.Tensor) -> tuple:
    """What lua/luabridge/torch/module.lua's M.tensor takes to make a Lua tensor over x's memory (CPU only): the
    type name, the registered buffer and x's layout; an empty x comes as a Lua tensor of its own."""
    if x.device.type != "cpu":
        raise TypeError(f"LuaModule: tensors on {x.device} are not supported (LuaModule runs on the CPU)")
    name = type_name(x.dtype)
    x = x.detach()
    if x.numel() == 0:
        return (from_numpy(x.numpy()),)
    shape, strides = x.shape, x.stride()
    array = x.numpy()
    canonical_nans(array)
    if x.is_contiguous():
        span, extent = array, array.size
    else:   # the memory x spans, from its first element (torch strides are never negative)
        extent = 1 + sum((n - 1) * s for n, s in zip(shape, strides))
        span = torch.as_strided(x, (extent,), (1,)).numpy()
    buffer_id = b.buffers.register(span)
    if not shape:   # 0-dim: one element, as a 1-D tensor (torch7 has no 0-dim tensors)
        shape, strides = (1,), (1,)
    return (name, buffer_id, *split_address(x.data_ptr()), extent, len(shape), *shape, *strides)


def table_args(b: Bridge, make: Any, leaves: tuple, spec: Spec) -> tuple:
    """The argument standing for nested Lua tables of leaves laid out as spec (a table spec),
    their tensors made with make (M.tensor); a lone tensor goes through Lent.args instead."""
    return (nest(b, [make(*tensor_args(b, x)) for x in leaves], spec),)


def nest(b: Bridge, lua_leaves: list, spec: Spec) -> Any:
    """Lua tensors laid out as spec: the tensor itself, or nested Lua tables of them."""
    it = iter(lua_leaves)

    def build(s: Spec) -> Any:
        return next(it) if s is None else b.lua.table_from([build(c) for c in s])

    return build(spec)


class Staging:
    """Lua tensors that the output gradients are copied into, kept from one backward to the next.
    Autograd hands new gradient tensors to every backward; copying one (its output's size) costs
    less than making a Lua tensor over new memory."""

    __slots__ = ("slots",)

    def __init__(self) -> None:
        self.slots: list[tuple[torch.Tensor, np.ndarray, Any]] = []   # (tensor, its numpy view, Lua tensor)

    def args(self, b: Bridge, make: Any, grads: tuple, spec: Spec) -> tuple:
        slots = self.slots
        del slots[len(grads):]
        for i, g in enumerate(grads):
            if i == len(slots):
                slots.append(_staged(b, make, g))
            else:
                tensor = slots[i][0]
                if tensor.shape != g.shape or tensor.dtype != g.dtype:
                    slots[i] = _staged(b, make, g)
            tensor, array, lua = slots[i]
            tensor.copy_(g)
            canonical_nans(array)
        if spec is None:
            return (lua,)
        return (nest(b, [lua for _, _, lua in slots], spec),)


def _staged(b: Bridge, make: Any, like: torch.Tensor) -> tuple[torch.Tensor, np.ndarray, Any]:
    t = torch.empty(like.shape, dtype=like.dtype)
    return t, t.numpy(), make(*tensor_args(b, t))


def canonical_nans(array: np.ndarray) -> None:
    """interop's NaN rewrite (LuaJIT must never read a NaN with a payload), behind a cheaper test
    for the usual case of no NaN at all: the sum of squares (one BLAS dot, half a min's cost on
    small arrays) is NaN exactly when an element is (infinities square to +inf, never NaN)."""
    if array.dtype.kind == "f" and array.size:
        squares = np.vdot(array, array)
        if squares != squares:
            canonicalise_nans(array)


class Lent:
    """The lone input tensor lent to Lua by the latest forward, by its layout. When the same
    memory comes again (the same tensor, or a view with the same address, sizes, strides and
    dtype), Lua uses the view it made last time (a new view of the storage it kept if the module
    changed that view's layout) instead of Python registering a buffer and Lua making a storage. Sound because the registered buffer holds the first tensor's
    memory while Lua keeps its storage: no other memory can lie at that address meanwhile, and
    values changed in place are seen because the memory is shared."""

    __slots__ = ("key", "array", "pending")

    def __init__(self) -> None:
        self.key: tuple | None = None        # the layout Lua keeps a storage for
        self.array: np.ndarray | None = None   # a numpy view of it, for the NaN check
        self.pending: tuple | None = None    # the layout lent by the call under way

    def args(self, b: Bridge, x: torch.Tensor) -> tuple:
        """lua/luabridge/torch/module.lua M.forward's arguments for x: `true` for the memory lent last time."""
        key = (x.data_ptr(), x.shape, x.stride(), x.dtype)
        if key == self.key:
            canonical_nans(self.array)
            return (True,)
        self.key = None   # Lua keeps the new storage only once its forward has started
        args = tensor_args(b, x)
        self.pending = (key, x.detach().numpy()) if isinstance(args[0], str) else None
        return args

    def kept(self) -> None:
        """After a forward made with args(): Lua holds the storage of what it lent."""
        if self.pending is not None:
            (self.key, self.array), self.pending = self.pending, None


class Views:
    """Torch views of a Lua value's tensors, rebuilt only when Lua says they moved (or when the
    last rebuild failed, since Lua's record of them was updated all the same)."""

    __slots__ = ("leaves", "spec", "valid")

    def __init__(self) -> None:
        self.leaves: list[torch.Tensor] = []
        self.spec: Spec = None
        self.valid = False

    def copies(self, needed: tuple | None, value: Any, moved: bool, what: str) -> tuple:
        """Copies of value's tensors (`what` names it in errors): of those marked in needed
        (None: all), None for the others. value lies where the views do unless moved."""
        if moved or not self.valid:
            self.valid = False
            leaves: list = []
            self.spec = _proxy_spec(wrap(value), leaves, what)
            self.leaves = [torch.from_numpy(to_numpy(t)) for t in leaves]
            self.valid = True
        if needed is None:
            leaves = self.leaves
            return (leaves[0].clone(),) if len(leaves) == 1 else tuple([t.clone() for t in leaves])
        return tuple([t.clone() if need else None for t, need in zip(self.leaves, needed)])


def _proxy_spec(value: Any, leaves: list, what: str) -> Spec:
    """flatten for wrapped Lua values (tensor proxies, lists of them); `what` names the value."""
    if isinstance(value, list):
        return tuple(_proxy_spec(v, leaves, what) for v in value)
    if value is None or isinstance(value, (int, float, str, dict)):
        raise TypeError(f"LuaModule: the Lua module's {what} holds {value!r}, not a tensor or a table of tensors")
    leaves.append(value)
    return None

