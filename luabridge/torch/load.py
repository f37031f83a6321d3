"""`load_lua`: a Torch7 file as PyTorch values, as PyTorch 0.4's
``torch.utils.serialization.load_lua`` gave them.

The file is read by Lua's torch.load (`luabridge.load`); then tensors become torch tensors
over the same memory (no copy: tensors sharing a storage share it still), storages 1-D torch
tensors over their memory (PyTorch's typed storages are deprecated), nn modules
`LuaModule`s (live Lua modules, run by Lua), plain tables lists (keys exactly 1..n, n >= 1) or
dicts (keys Python cannot hash, such as tables, wrapped in `luabridge.t7.Key`), and other
Torch class instances (criterions, nngraph nodes, classes read with
``unknownClasses='table'`` stay dicts with ``__typename``) `luabridge.t7.TorchObject`s of
their fields. Numbers, strings, booleans come as Python's; Lua functions (read only with
``functions='load'``) as luabridge function proxies. Shared and cyclic references stay so;
but a module containing itself (directly or through others), which torch7's recursive methods
cannot run, is a ConversionError naming it and the file. Modules nested to any depth load.
"""
from __future__ import annotations

import os
from typing import Any

import numpy as np
import torch

from ..core.interop import to_numpy
from ..t7.load import load_value
from ..core.proxy import lua_kind, wrap
from ..core.runtime import bridge
from ..t7 import Key, TorchObject
from .convert import ConversionError, recursion_room, tree_size
from .module import LuaModule


def _tensor(t: Any) -> torch.Tensor:
    """A torch tensor over a Lua tensor's memory (a CUDA one through DLPack)."""
    a = to_numpy(t)
    return torch.from_numpy(a) if isinstance(a, np.ndarray) else torch.from_dlpack(a)


TDS_CONTAINERS = ("tds.Hash", "tds.Vec")
PAIRS = ("function(x) local keys, values, n = {}, {}, 0 "
         "for k, v in pairs(x) do n = n + 1; keys[n], values[n] = k, v end return keys, values, n end")


class _Converter:
    """Turns Lua values into PyTorch ones, each Lua table, tensor or object once (memo keyed by
    torch.pointer), so shared references and cycles carry over."""

    def __init__(self, file: str, list_heuristic: bool = True, int_heuristic: bool = True,
                 unknown_classes: bool = False) -> None:
        self.file = file
        self.list_heuristic, self.int_heuristic, self.unknown_classes = list_heuristic, int_heuristic, unknown_classes
        b = bridge()
        self.g = b.lua.globals()
        self.memo: dict[int, Any] = {}
        self._pairs = b.lua.eval(PAIRS)

    def entries(self, x: Any) -> list[tuple[Any, Any]]:
        """x's (key, value) pairs as Lua's pairs gives them (tds's containers through __pairs)."""
        keys, values, n = self._pairs(x)
        return [(keys[i], values[i]) for i in range(1, int(n) + 1)]

    def value(self, x: Any) -> Any:
        kind = lua_kind(x)
        if kind == "other":
            value = wrap(x)   # numbers, strings, booleans, nil; functions (functions='load')
            if not self.int_heuristic and type(value) is int:
                return float(value)   # Lua's numbers are doubles: exact
            return value
        key = self.g.torch.pointer(x)
        if key not in self.memo:
            self.memo[key] = self.fresh(x, kind, key)
        return self.memo[key]

    def fresh(self, x: Any, kind: str, key: int) -> Any:
        """The conversion of a Lua table, tensor, storage or object met for the first time; a
        container enters the memo before its contents, which may refer to it."""
        if kind == "tensor":
            return _tensor(x)
        if kind == "storage":
            tensor_class = str(self.g.torch.typename(x)).split(".")[1].replace("Storage", "Tensor")
            return _tensor(self.g.torch[tensor_class](x))
        if kind == "object" and self.g.torch.isTypeOf(x, "nn.Module"):
            return self.module(x)
        typename = str(self.g.torch.typename(x)) if kind == "object" else None
        if typename in TDS_CONTAINERS:
            kind = "table"   # once tds is loaded its containers are userdata: read them as tables
        entries = self.entries(x)
        n = len(entries)
        listy = self.list_heuristic or typename == "tds.Vec"
        if kind == "table" and listy and n and all(type(k) is int and 1 <= k <= n for k, _ in entries):
            out: Any = [None] * n
            self.memo[key] = out
            for k, v in entries:
                out[k - 1] = self.value(v)
            return out
        if kind == "table" and typename is None and self.unknown_classes and isinstance(x["__typename"], str):
            # a class read as a table (unknownClasses='table'): a TorchObject, as PyTorch 0.4 gave it
            typename, kind, version = x["__typename"], "object", x["__version"] or 0
            entries = [(k, v) for k, v in entries if k not in ("__typename", "__version")]
        else:
            version = 0
        out = TorchObject(typename, version) if kind == "object" else {}
        self.memo[key] = out
        fields = out.fields if kind == "object" else out
        for k, v in entries:
            k = self.value(k)
            fields[Key(k) if isinstance(k, (dict, list, torch.Tensor)) else k] = self.value(v)
        return out

    def module(self, x: Any) -> LuaModule:
        """A LuaModule over a module that torch7's recursive methods can walk: no cycle, children
        that are modules, parameters that are floating-point tensors with gradients; else a
        ConversionError naming the module, its path, the field and the file."""
        try:
            levels = tree_size(x)
        except ConversionError as e:
            raise ConversionError(e.typename, e.path, f"{e.reason}, which a LuaModule cannot run (file {self.file})",
                                  malformed=True) from None
        b = bridge()
        problem = b.call(b.module("luabridge.model.tree").malformed, x)
        if problem is not None:
            typename, path, field, reason = problem
            raise ConversionError(str(typename), str(path), f"{reason}, which a LuaModule cannot run (file {self.file})",
                                  str(field), malformed=True)
        with recursion_room(levels):   # LuaModule binds the parameters of the tree recursively
            return LuaModule(wrap(x))


LONG_FORMATS = {4: "b32", 8: "b64"}   # PyTorch 0.4's long_size: the bytes of a `long` in the file


def load_lua(path: str | os.PathLike, format: str = "binary", *, list_heuristic: bool = True,
             int_heuristic: bool = True, unknown_classes: bool = False, long_size: int | None = None,
             **options: str) -> Any:
    """The object a Torch7 file holds, as PyTorch values (see the module's doc): tensors as torch
    tensors sharing the loaded memory, nn modules as `LuaModule`s, tables as lists or dicts.
    `format` and `options` go to `luabridge.load` (``unknownClasses='table'``,
    ``functions='skip'`` or ``'load'``); its errors (LuaError naming the file) pass through. A
    module containing itself is a ConversionError.

    PyTorch 0.4's keywords (its T7Reader's) mean what they meant there: ``list_heuristic=False``
    reads every table as a dict (tds.Vec stays a list); ``int_heuristic=False`` reads numbers
    as floats (else whole ones are ints); ``unknown_classes=True`` reads a class that no package
    defines as a `TorchObject` of its fields (else it is an error); ``long_size`` (4 or 8) is
    the size of a `long` in the file, as format 'b32' or 'b64' (None: this machine's, 8)."""
    if long_size is not None:
        if long_size not in LONG_FORMATS:
            raise ValueError(f"load_lua: long_size must be None, 4 or 8, not {long_size!r}")
        if format not in ("binary", LONG_FORMATS[long_size]):
            raise ValueError(f"load_lua: long_size={long_size} reads the binary format, which format={format!r} is not")
        format = LONG_FORMATS[long_size]
    if unknown_classes:
        options.setdefault("unknownClasses", "table")
    converter = _Converter(os.fspath(path), list_heuristic, int_heuristic, unknown_classes)
    return converter.value(load_value(path, format, **options))
