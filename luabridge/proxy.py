"""Lua objects seen from Python: attribute reads, method calls as m.f(x) -> m:f(x), tensors
that numpy, DLPack consumers and PyTorch can take without a copy."""
from __future__ import annotations

from typing import Any

from lupa import luajit21 as lupa
import numpy as np

from .runtime import bridge


def _kind(obj: Any) -> str:
    """'tensor', 'storage', 'object' (a torch class instance), 'table' or 'other' for a Lua value."""
    if lupa.lua_type(obj) not in ("table", "userdata"):
        return "other"
    return bridge().lua.globals().__luabridge_kind(obj)


def unwrap(x: Any) -> Any:
    """The Lua value behind a proxy; numpy arrays become shared Lua tensors."""
    if isinstance(x, LuaObject):
        return x._lua
    if isinstance(x, np.ndarray):
        from .interop import from_numpy

        return from_numpy(x)
    return x


def wrap(x: Any) -> Any:
    """A Python view of a Lua value: tensors and class instances become proxies."""
    kind = _kind(x)
    if kind == "tensor":
        return Tensor(x)
    if kind == "storage":
        return Storage(x)
    if kind == "object":
        return LuaObject(x)
    return x


class LuaObject:
    """A torch class instance in Lua: fields read through, methods called with self."""

    __slots__ = ("_lua",)

    def __init__(self, lua_obj: Any) -> None:
        object.__setattr__(self, "_lua", lua_obj)

    def __getattr__(self, name: str) -> Any:
        value = self._lua[name]
        if value is None:
            raise AttributeError(f"{self._typename()} has no field or method {name!r}")
        if lupa.lua_type(value) == "function":
            return _Method(self, value, name)
        return wrap(value)

    def __setattr__(self, name: str, value: Any) -> None:
        self._lua[name] = unwrap(value)

    def _typename(self) -> str:
        return str(bridge().lua.globals().torch.type(self._lua))

    def __repr__(self) -> str:
        return str(bridge().lua.globals().tostring(self._lua))

    __str__ = __repr__


class _Method:
    __slots__ = ("owner", "fn", "name")

    def __init__(self, owner: LuaObject, fn: Any, name: str) -> None:
        self.owner, self.fn, self.name = owner, fn, name

    def __call__(self, *args: Any) -> Any:
        result = bridge().call(self.fn, self.owner._lua, *[unwrap(a) for a in args])
        if isinstance(result, tuple):
            return tuple(self.owner if r is self.owner._lua else wrap(r) for r in result)
        if result is not None and _kind(result) != "other" and result == self.owner._lua:
            return self.owner  # chained calls keep the same proxy
        return wrap(result)


class Tensor(LuaObject):
    """A Lua tensor: numpy-compatible without a copy (array interface, DLPack)."""

    __slots__ = ()

    def numpy(self) -> np.ndarray:
        from .interop import to_numpy

        return to_numpy(self._lua)

    @property
    def __array_interface__(self) -> dict:
        return self.numpy().__array_interface__

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def __dlpack__(self, **kwargs: Any) -> Any:
        if self._lua._device:
            from .cuda import device_view

            return device_view(self._lua).__dlpack__(**kwargs)
        return self.numpy().__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        if self._lua._device:
            from .cuda import device_view

            return device_view(self._lua).__dlpack_device__()
        return (1, 0)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.numpy().shape

    @property
    def dtype(self) -> np.dtype:
        return self.numpy().dtype

    def __len__(self) -> int:
        return self.shape[0] if self.shape else 0


class Storage(LuaObject):
    """A Lua storage; as a Python sequence it is 0-based (sizes: list(t.size()))."""

    __slots__ = ()

    def __len__(self) -> int:
        return int(self._lua._n)

    def __getitem__(self, i: int) -> Any:
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"storage index {i} out of range for size {n}")
        return self._lua[i % n + 1]

    def __iter__(self):
        return iter(self.tolist())

    def tolist(self) -> list:
        return list(self._lua.totable(self._lua).values())
