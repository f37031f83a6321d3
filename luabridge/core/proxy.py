"""Lua objects seen from Python: attribute reads, method calls as m.f(x) -> m:f(x), tensors
that numpy, DLPack consumers and PyTorch can take without a copy, Lua module tables (nn, optim)
as namespaces. Values cross as follows (unwrap: Python -> Lua, wrap: Lua -> Python):

  proxies <-> their Lua object        numpy arrays -> tensors sharing the memory
  lists, tuples -> Lua arrays         Lua tables -> lists (keys 1..n) or dicts, copied
  dicts -> Lua tables (synced back)   Python functions -> Lua functions (callback)
  Lua functions -> Function proxies   numbers, strings, booleans, nil as lupa converts them
  DLPack producers (PyTorch tensors, CuPy and JAX arrays) and objects with __array_interface__
  -> tensors sharing the memory (no library is imported for them)
"""
from __future__ import annotations

import threading
from typing import Any

import numpy as np

from . import interop
from .errors import LuaError
from .runtime import bridge, foreign_objects_named
from .runtime import luajit21 as lupa

_raised = threading.local()  # the exception a Python callback raised into Lua, per thread


def lua_kind(obj: Any) -> str:
    """'tensor', 'storage', 'object' (a torch class instance), 'table' or 'other' for a Lua value."""
    if lupa.lua_type(obj) not in ("table", "userdata"):
        return "other"
    with foreign_objects_named:
        return bridge().lua.globals().__luabridge_kind(obj)


def unwrap(x: Any, synced: list | None = None) -> Any:
    """The Lua value for a Python one: a proxy's Lua object; numpy arrays and other arrays that
    can lend their memory (see `shared_tensor`) become shared Lua tensors; lists and tuples
    become Lua arrays and dicts Lua tables (elements converted alike); Python functions become
    Lua functions (see `callback`). With `synced`, each dict converted at the top level is
    recorded there as (dict, table) so that `sync` can copy Lua's changes back."""
    if lupa.lua_type(x) is not None:
        return x
    if isinstance(x, LuaObject):
        return x._lua
    if isinstance(x, np.ndarray):
        return interop.from_numpy(x)
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, (list, tuple)):
        return bridge().lua.table_from([unwrap(v) for v in x])
    if isinstance(x, dict):
        table = bridge().lua.table_from({k: unwrap(v) for k, v in x.items()})
        if synced is not None:
            synced.append((x, table))
        return table
    if callable(x) and not isinstance(x, type):
        return callback(x)
    if (hasattr(x, "__dlpack__") or hasattr(x, "__array_interface__")) and not isinstance(x, type):
        return shared_tensor(x)
    return x


def shared_tensor(x: Any) -> Any:
    """A Lua tensor over the memory of an array that is not numpy's, without a copy: a DLPack
    producer (a PyTorch tensor, any strides) or an object with __array_interface__. Lua's
    writes show in x. A tensor that requires grad is refused: Lua's results take no part in
    autograd, so its detach() (or luabridge.torch.LuaModule, which does) must be asked for."""
    if getattr(x, "requires_grad", False):
        raise TypeError(f"a {type(x).__name__} that requires grad cannot be shared with Lua (Lua takes no "
                        "part in autograd): pass x.detach(), or use luabridge.torch.LuaModule")
    if hasattr(x, "__dlpack__"):
        return interop.from_dlpack(x)
    return interop.from_numpy(np.asarray(x))


def to_numpy(t: Any) -> Any:
    """The array sharing the memory of a Lua tensor or tensor proxy: numpy's for a CPU tensor,
    the CUDA array module's (CuPy; numpy standing in) for a CUDA one."""
    return interop.to_numpy(unwrap(t))


def sync(synced: list) -> None:
    """Copies the Lua tables made from dicts back into those dicts (optim's config and state
    tables gain fields, such as momentum buffers, that the next call must see again)."""
    for d, table in synced:
        d.clear()
        d.update(_from_table(table, {}))


def callback(fn: Any) -> Any:
    """fn as a function for Lua: it receives proxies (tensors, objects, lists) and its results
    reach Lua as Lua values (numbers, tensors from arrays or proxies, tables); a tuple gives
    several results, as in optim's `return loss, grad`."""
    def from_lua(*args: Any) -> Any:
        try:
            result = fn(*[wrap(a) for a in args])
        except BaseException as e:
            _raised.error = e  # `call` raises it again once the Lua error reaches Python
            raise
        if isinstance(result, tuple):
            return tuple(unwrap(r) for r in result)
        return unwrap(result)

    return from_lua


def call(fn: Any, *args: Any, self: Any = None) -> Any:
    """Calls a Lua function with Python arguments (converted by unwrap; `self`, a proxy, goes
    first); results come back wrapped, several as a tuple, `self` as its own proxy so that calls
    chain. Dicts passed in see the changes Lua made to their tables."""
    synced: list = []
    lua_args = [unwrap(a, synced) for a in args]
    if self is not None:
        lua_args.insert(0, self._lua)
    _raised.error = None
    try:
        result = bridge().call(fn, *lua_args)
    except LuaError as e:
        error, _raised.error = _raised.error, None
        if error is not None and str(error) in str(e):
            raise error from e  # a Python callback failed: its own exception, Lua's traceback as cause
        raise
    sync(synced)
    same = bridge().lua.globals().rawequal

    def back(r: Any) -> Any:
        if self is not None and lupa.lua_type(r) == "table" and same(r, self._lua):
            return self
        return wrap(r)

    return tuple(back(r) for r in result) if isinstance(result, tuple) else back(result)


def wrap(x: Any) -> Any:
    """A Python view of a Lua value: tensors, storages and class instances become proxies
    (sharing the Lua object); plain tables become lists (keys 1..n) or dicts, copied."""
    kind = lua_kind(x)
    if kind == "tensor":
        return Tensor(x)
    if kind == "storage":
        return Storage(x)
    if kind == "object":
        return LuaObject(x)
    if kind == "table":
        return Function(x) if _callable_table(x) else _from_table(x, {})
    if lupa.lua_type(x) == "function":
        return Function(x)
    return x


def _callable_table(table: Any) -> bool:
    """True for a table whose metatable has __call (a class constructor such as nn.Linear)."""
    g = bridge().lua.globals()
    mt = g.getmetatable(table)
    return lupa.lua_type(mt) == "table" and g.rawget(mt, "__call") is not None


def _identity(table: Any) -> Any:
    g = bridge().lua.globals()
    return g.torch.pointer(table) if g.torch is not None else str(g.tostring(table))


def _from_table(table: Any, seen: dict) -> Any:
    """A plain Lua table as a list or dict of wrapped values (shared subtables stay shared)."""
    key = _identity(table)
    if key in seen:
        return seen[key]
    items = list(table.items())
    n = len(items)
    is_list = all(type(k) is int and 1 <= k <= n for k, _ in items)
    out: Any = [None] * n if is_list else {}
    seen[key] = out
    for k, v in items:
        value = _from_table(v, seen) if lua_kind(v) == "table" else wrap(v)
        if is_list:
            out[k - 1] = value
        else:
            out[k] = value
    return out


class Namespace:
    """A Lua module table reached by name, such as `nn` or `optim.ConfusionMatrix`: fields read
    as namespaces (tables, functions, class constructors) or wrapped values; calling it calls the
    Lua value (see `call`). It resolves in the calling thread's runtime, requiring `module`."""

    __slots__ = ("_module", "_path")

    def __init__(self, module: str, path: tuple[str, ...] = ()) -> None:
        self._module, self._path = module, path

    def _value(self) -> Any:
        b = bridge()
        value = b.lua.globals().package.loaded[self._module]
        if lupa.lua_type(value) != "table":  # not loaded yet (or a failed load's sentinel)
            value = b.call(b.lua.globals().require, self._module)
        for name in self._path:
            value = value[name]
        return value

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        value = self._value()[name]
        if value is None:
            raise AttributeError(f"{'.'.join((self._module, *self._path))} has no field {name!r}")
        if lupa.lua_type(value) == "function" or lua_kind(value) == "table":
            return Namespace(self._module, (*self._path, name))
        return wrap(value)

    def __dir__(self) -> list[str]:
        value = self._value()
        return sorted(str(k) for k in value.keys()) if lua_kind(value) == "table" else []

    def __call__(self, *args: Any) -> Any:
        return call(self._value(), *args)

    def __repr__(self) -> str:
        return str(bridge().lua.globals().tostring(self._value()))


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
        with foreign_objects_named:
            return str(bridge().lua.globals().torch.type(self._lua))

    def __call__(self, *args: Any) -> Any:
        """The object's __call__ (a module: forward, and backward given a gradOutput)."""
        return call(self._lua, *args)

    def __repr__(self) -> str:
        with foreign_objects_named:
            return str(bridge().lua.globals().tostring(self._lua))

    __str__ = __repr__


class _Method:
    __slots__ = ("owner", "fn", "name")

    def __init__(self, owner: LuaObject, fn: Any, name: str) -> None:
        self.owner, self.fn, self.name = owner, fn, name

    def __call__(self, *args: Any) -> Any:
        return call(self.fn, *args, self=self.owner)


class Function(LuaObject):
    """A Lua function (or callable table): calling it converts arguments and results as `call`
    does."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(f"a Lua function has no field {name!r}")


class Tensor(LuaObject):
    """A Lua tensor: numpy-compatible without a copy (array interface, DLPack)."""

    __slots__ = ()

    def numpy(self) -> np.ndarray:
        return interop.to_numpy(self._lua)

    @property
    def __array_interface__(self) -> dict:
        """A CPU tensor's memory (a device array has none here: numpy then takes __array__)."""
        return self.numpy().__array_interface__

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        a = interop.to_host(self._lua)
        return a if dtype is None else a.astype(dtype)

    def __dlpack__(self, **kwargs: Any) -> Any:
        return self.numpy().__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.numpy().__dlpack_device__()

    @property
    def shape(self) -> tuple[int, ...]:
        return self.numpy().shape

    @property
    def dtype(self) -> np.dtype:
        return self.numpy().dtype

    def __len__(self) -> int:
        return self.shape[0] if self.shape else 0

    def __getitem__(self, key: Any) -> Any:
        """numpy indexing (0-based) of the shared memory: slices are views, elements numbers."""
        return self.numpy()[key]

    def __setitem__(self, key: Any, value: Any) -> None:
        self.numpy()[key] = value


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
