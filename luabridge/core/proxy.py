"""Lua objects seen from Python: attribute reads, method calls as m.f(x) -> m:f(x), tensors
that numpy, DLPack consumers and PyTorch can take without a copy, Lua module tables (nn, optim)
as namespaces. Values cross as follows (unwrap: Python -> Lua, wrap: Lua -> Python):

  proxies <-> their Lua object        numpy arrays -> tensors sharing the memory
  lists, tuples -> Lua arrays         Lua tables -> lists (keys 1..n) or dicts, copied
  dicts -> Lua tables (synced back)   Python functions -> Lua functions (callback)
  Lua functions -> Function proxies   numbers, strings, booleans, nil as lupa converts them
  DLPack producers (PyTorch tensors, CuPy and JAX arrays) and objects with __array_interface__
  -> tensors sharing the memory (no library is imported for them)

Shown in a notebook or at a prompt: a tensor past PRINT_OPTIONS["threshold"] elements is
summarised as numpy summarises (its first and last `edgeitems` along each dimension), with
torch7's footer; an image-shaped tensor (1 or 3 x H x W) is also a picture (`_repr_png_`); a
module prints its tree as torch7 does; dir() of a proxy lists the object's fields and methods.
"""
from __future__ import annotations

import struct
import threading
import zlib
from typing import Any

import numpy as np

from . import interop
from .errors import LuaError
from .runtime import bridge, foreign_objects_named
from .runtime import luajit21 as lupa

_raised = threading.local()  # the exception a Python callback raised into Lua, per thread
# How a tensor's repr is laid out: up to `threshold` elements in full (torch7's print), past it
# summarised with the first and last `edgeitems` of each dimension (numpy's rule); see set_printoptions.
PRINT_OPTIONS = {"threshold": 1000, "edgeitems": 3, "precision": 4}
# The sizes `_repr_png_` takes for a picture: channels x height x width, each side at least MIN_SIDE.
IMAGE_CHANNELS, MIN_SIDE = (1, 3), 8


def set_printoptions(threshold: int | None = None, edgeitems: int | None = None,
                     precision: int | None = None) -> dict:
    """Sets how tensors are shown (PRINT_OPTIONS); returns the options now in force."""
    for name, value in (("threshold", threshold), ("edgeitems", edgeitems), ("precision", precision)):
        if value is not None:
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"set_printoptions: {name} must be an integer >= 0, got {value!r}")
            PRINT_OPTIONS[name] = value
    return dict(PRINT_OPTIONS)


def png_bytes(pixels: np.ndarray) -> bytes:
    """A PNG file of 8-bit pixels: height x width (grey) or height x width x 1, 3 or 4 channels."""
    a = np.ascontiguousarray(pixels, dtype=np.uint8)
    if a.ndim == 3 and a.shape[2] == 1:
        a = a[:, :, 0]
    if a.ndim not in (2, 3) or (a.ndim == 3 and a.shape[2] not in (3, 4)) or 0 in a.shape:
        raise ValueError(f"png_bytes: expected height x width [x 1, 3 or 4] pixels, got shape {a.shape}")
    height, width = a.shape[:2]
    colour = 0 if a.ndim == 2 else 2 if a.shape[2] == 3 else 6   # grey, RGB, RGBA
    rows = a.reshape(height, -1)
    raw = b"".join(b"\x00" + rows[i].tobytes() for i in range(height))   # filter 0 on each row

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, colour, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b"")


def image_pixels(a: np.ndarray) -> np.ndarray:
    """A channels x height x width (or height x width) image as 8-bit height x width x channels
    pixels: bytes as they are; other types as torch7's images, 0..1, scaled to 0..255 (a range
    outside 0..1 is stretched from its minimum to its maximum, as image.display does)."""
    a = np.asarray(a)
    if a.ndim == 3:
        a = np.moveaxis(a, 0, -1)
    if a.dtype == np.uint8:
        return np.ascontiguousarray(a)
    f = np.nan_to_num(a.astype(np.float64))
    low, high = (float(f.min()), float(f.max())) if f.size else (0.0, 1.0)
    if low < 0 or high > 1:
        f = (f - low) / (high - low) if high > low else np.zeros_like(f)
    return np.rint(f * 255).astype(np.uint8)


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

    def __dir__(self) -> list[str]:
        """The object's fields and methods (its own and its classes'), then the proxy's own."""
        b = bridge()
        with foreign_objects_named:
            names = b.call(b.module("luabridge.core.proxy").names, self._lua)
        return sorted(set(names.values()) | {n for n in dir(type(self)) if not n.startswith("_")})

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

    def __repr__(self) -> str:
        """torch7's print up to PRINT_OPTIONS' threshold; past it numpy's summary, torch7's footer."""
        a = interop.to_host(self._lua)
        if a.size <= PRINT_OPTIONS["threshold"]:
            return super().__repr__()
        body = np.array2string(a, threshold=0, edgeitems=PRINT_OPTIONS["edgeitems"],
                               precision=PRINT_OPTIONS["precision"], max_line_width=100)
        return f"{body}\n[{self._typename()} of size {'x'.join(map(str, a.shape))}]"

    __str__ = __repr__

    def _repr_png_(self) -> bytes | None:
        """A picture of an image-shaped tensor (1 or 3 x H x W, sides of MIN_SIDE or more), else
        None (IPython then shows the text)."""
        shape = self.shape
        if len(shape) != 3 or shape[0] not in IMAGE_CHANNELS or min(shape[1:]) < MIN_SIDE:
            return None
        return png_bytes(image_pixels(interop.to_host(self._lua)))

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
