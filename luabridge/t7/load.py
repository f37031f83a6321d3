"""Torch7 files from Python through the Lua reader and writer (File.lua).

``luabridge.load(path)`` runs torch.load and returns proxies: modules, tensors over the loaded
storages, tables as lists or dicts. The file is read once: the Lua reader requires the package of
ours that defines a class (nn, nngraph, ...: lua/torch/t7format.lua's classPackages) when it meets
it. ``luabridge.save(path, obj)`` runs torch.save on Lua objects or Python values: numpy arrays are
written as tensors of their dtype (views of one array share one storage), dicts, lists and tuples
as tables. Both raise LuaError naming the file.

For plain Python values without running any Lua, see `luabridge.t7` (reader, writer).
"""
from __future__ import annotations

import os
from typing import Any, Callable, Mapping

import numpy as np

from ..core.errors import LuaError
from ..core.interop import from_array, from_numpy
from ..core.memory import TYPE_OF_DTYPE
from ..core.proxy import LuaObject, call, wrap
from ..core.runtime import bridge, luajit21 as lupa, require
from .format import FORMATS
from .writer import flat_of_root, view_of_root

SAFE_OPTIONS = {"functions": "error"}  # what `read_t7` passes to torch.load unless the caller says otherwise
_SAVABLE = (type(None), bool, int, float, str, bytes, np.generic, LuaObject)


def _torch_function(name: str) -> Any:
    require("torch")
    return bridge().lua.globals().torch[name]


def _checked(path: str, format: str, op: str) -> None:
    if format not in FORMATS:
        raise LuaError(f"luabridge.{op}: {path}: unknown format {format!r} (one of {', '.join(FORMATS)})")


def _naming(path: str, error: LuaError) -> LuaError:
    """The error itself when its message names the file, else one that does."""
    if path in error.message:
        return error
    return LuaError(f"{error.message} (file {path})", error.traceback)


def load(path: str | os.PathLike, format: str = "binary", **options: str) -> Any:
    """The object a .t7 file holds, read once by Lua's torch.load (format: binary, ascii, b32 or
    b64). The packages of ours that define the file's classes (nn, nngraph, ...) are required as
    the reader meets them (nn also reads the cudnn.* and cunn classes of GPU checkpoints).
    Options as torch.load's table:
    ``unknownClasses='table'`` reads a class we lack as a table with ``__typename``,
    ``functions='skip'`` reads Lua functions as None, ``functions='load'`` loads them (trusted
    files only; refused by default). Errors (missing file, corrupt or hostile contents, a file
    that is not a .t7, which says what it looks like) raise LuaError naming the file."""
    return wrap(load_value(path, format, **options))


def load_value(path: str | os.PathLike, format: str = "binary", **options: str) -> Any:
    """As `load`, but the Lua value itself (lupa's objects for tables, tensors and instances),
    for readers that keep the identity of tables (luabridge.torch.load_lua)."""
    path = os.fspath(path)
    _checked(path, format, "load")
    if not os.path.isfile(path):
        raise LuaError(f"luabridge.load: no such file {path}")
    try:
        return read_t7(path, format, options)
    except LuaError as e:
        raise _naming(path, e) from None


def read_t7(source: str | bytes, format: str = "binary", options: Mapping[str, str] | None = None,
            class_loader: Callable[[str], None] | None = None) -> Any:
    """The Lua value a .t7 file (a path) or its bytes hold, read in the calling thread's runtime:
    the one way a Torch7 file enters luabridge (luabridge.load, load_lua, convert, Model and its
    Ray workers, LuaModule unpickling). Lua functions in it are refused (a LuaError saying where
    one sits) unless options say ``functions='skip'`` (read as nil) or ``functions='load'``
    (loading runs the file's code: trusted files only), whatever torch.deserialize's own default.
    Read once: the reader requires the packages of ours that define the file's classes as it
    meets them (File.lua's classOf), and calls class_loader(name), when given, on a class that
    none defines (code that may define it, such as a Model's source)."""
    b = bridge()
    reader = _torch_function("load" if isinstance(source, str) else "deserialize")
    lua_options = b.lua.table_from({**SAFE_OPTIONS, **(options or {})})
    if class_loader is not None:
        lua_options.classLoader = b.lua.eval("function(f) return function(name) f(name) end end")(class_loader)
    return b.call(reader, source, format, lua_options)


def _tensor(a: np.ndarray, storages: dict) -> Any:
    """A Lua tensor for a; clean views of one array (t7.view_of_root) share one storage, as the
    tensors of a Torch7 model do. Other arrays with negative strides or read-only ones are copied
    (Torch7 tensors have no negative strides; Lua tensors are writable)."""
    layout = view_of_root(a) if a.size and a.flags.writeable else None
    if layout is None or not layout[0].flags.writeable:
        shareable = a.flags.writeable and all(st >= 0 for st in a.strides)
        return from_numpy(a if shareable else np.array(a))
    root, offset, strides = layout
    if id(root) not in storages:
        flat = from_numpy(flat_of_root(root))
        storages[id(root)] = (root, flat.storage(flat))  # root kept alive for id()'s sake
    b = bridge()
    return from_array(b, b.lua.globals().torch[TYPE_OF_DTYPE[a.dtype] + "Tensor"], storages[id(root)][1],
                      offset, a.shape, strides)


def _prepared(obj: Any, where: str, storages: dict, parents: set) -> Any:
    """obj with its numpy arrays as Lua tensors (see _tensor); TypeError naming the first value
    that has no Torch7 form."""
    if isinstance(obj, np.ndarray):
        # one array saved twice is one tensor, written once and read back as one (as pickle keeps identity)
        key = ("tensor", id(obj))
        if key not in storages:
            storages[key] = (obj, _tensor(obj, storages))
        return storages[key][1]
    if isinstance(obj, (dict, list, tuple)):
        if id(obj) in parents:
            raise TypeError(f"luabridge.save: {where} contains itself (Python containers are copied to "
                            "Lua tables, so cycles cannot be; build cyclic tables in Lua)")
        parents.add(id(obj))
        if isinstance(obj, dict):
            out: Any = {_prepared(k, f"a key of {where}", storages, parents):
                        _prepared(v, f"{where}[{k!r}]", storages, parents) for k, v in obj.items()}
        else:
            out = [_prepared(v, f"{where}[{i}]", storages, parents) for i, v in enumerate(obj)]
        parents.discard(id(obj))
        return out
    if not isinstance(obj, _SAVABLE) and lupa.lua_type(obj) is None:
        raise TypeError(f"luabridge.save: {where} is a {type(obj).__name__}, which has no Torch7 form "
                        "(save None, bool, int, float, str, bytes, numpy arrays, lists, tuples, dicts "
                        "and Lua objects)")
    return obj


def save(path: str | os.PathLike, obj: Any, format: str = "binary") -> None:
    """Writes obj with Lua's torch.save (format: binary, ascii, b32 or b64). Python values are
    converted as for any Lua call: numpy arrays become tensors over their memory, and views of
    one array are written as tensors sharing one storage; dicts, lists and tuples become tables."""
    path = os.fspath(path)
    _checked(path, format, "save")
    obj = _prepared(obj, "obj", {}, set())
    try:
        call(_torch_function("save"), path, obj, format)
    except LuaError as e:
        raise _naming(path, e) from None
