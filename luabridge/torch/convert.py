"""`convert`: a Lua Torch7 module tree as a native PyTorch module tree, weights copied.

A converter per torch7 class (`CONVERTERS`, keyed by ``torch.typename``) builds the PyTorch
module; containers convert their children through `Context.child`, which carries the dotted
1-based path used in error messages and applies the strict rule. The converter files
(`convert_layers`, `convert_tables`, `convert_criterions`, `convert_graph`) import this module
and register themselves with `converter`; the package (luabridge/torch/__init__.py) imports them,
so they are registered before any use of this module.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch

from .. import eval as lua_eval
from .. import require, to_numpy, wrap
from ..proxy import LuaObject
from ..runtime import bridge
from .module import LuaModule


class ConversionError(Exception):
    """A module with no PyTorch counterpart (strict mode), or one whose settings cannot be kept."""

    def __init__(self, typename: str, path: str, reason: str = "has no PyTorch counterpart") -> None:
        self.typename, self.path = typename, path
        super().__init__(f"{typename} at {path or '<root>'} {reason}")


Converter = Callable[[LuaObject, "Context"], torch.nn.Module]
CONVERTERS: dict[str, Converter] = {}


def converter(*names: str) -> Callable[[Converter], Converter]:
    """Registers the decorated function as the converter of the torch7 classes `names` (one
    converter per class: a second one for the same class is a mistake, refused)."""
    def register(fn: Converter) -> Converter:
        for name in names:
            if name in CONVERTERS:
                raise ValueError(f"convert: {name} has two converters ({CONVERTERS[name].__module__} "
                                 f"and {fn.__module__})")
            CONVERTERS[name] = fn
        return fn
    return register


class _Shared:
    """What one conversion has made so far, so that what the Lua tree shares stays shared: a Lua
    module met twice becomes one PyTorch module, a Lua tensor held by two modules (clone('weight',
    'bias')) one Parameter."""

    def __init__(self) -> None:
        self.modules: dict[int, torch.nn.Module] = {}
        self.parameters: dict[tuple, torch.nn.Parameter] = {}


class Context:
    """Where a converter is in the tree (`path`: dotted, 1-based, "" at the root) and how strict."""

    def __init__(self, path: str = "", strict: bool = True, shared: _Shared | None = None) -> None:
        self.path, self.strict = path, strict
        self.shared = shared or _Shared()

    def child(self, module: LuaObject, key: int | str) -> torch.nn.Module:
        """The conversion of a child module, found at `key` (a 1-based index or a name) of this one."""
        path = f"{self.path}.{key}" if self.path else str(key)
        return _convert(module, Context(path, self.strict, self.shared))

    def children(self, modules: list[LuaObject]) -> list[torch.nn.Module]:
        """The conversions of a list of child modules (a container's `modules`, a criterion's
        `criterions`), each at its 1-based index."""
        return [self.child(module, i) for i, module in enumerate(modules, start=1)]

    def fail(self, module: LuaObject, reason: str) -> ConversionError:
        """The error for a module of this path whose settings the converter cannot keep."""
        return ConversionError(module._typename(), self.path, reason)


def tensor(t: Any) -> torch.Tensor:
    """A torch CPU copy of a Lua tensor (proxy or raw; a CUDA one is copied to the host), of the
    same dtype."""
    return torch.from_numpy(np.array(wrap(t), copy=True))


def _convert(module: LuaObject, ctx: Context) -> torch.nn.Module:
    key = bridge().lua.globals().torch.pointer(module._lua)
    if key not in ctx.shared.modules:
        ctx.shared.modules[key] = _convert_new(module, ctx)
    return ctx.shared.modules[key]


def _convert_new(module: LuaObject, ctx: Context) -> torch.nn.Module:
    typename = module._typename()
    fn = CONVERTERS.get(typename)
    try:
        if fn is None:
            raise ConversionError(typename, ctx.path)
        out = fn(module, ctx)
    except ConversionError as e:   # no counterpart, or settings the counterpart cannot keep
        if ctx.strict or e.path != ctx.path:
            raise
        return LuaModule(module)
    out.training = module._lua["train"] is not False   # this module's own mode (children keep theirs)
    _share_parameters(module, out, ctx.shared.parameters)
    return out


def _share_parameters(module: LuaObject, out: torch.nn.Module, seen: dict[tuple, torch.nn.Parameter]) -> None:
    """Makes out's own Parameters that stand for a Lua tensor met before (the field of the same
    name, the same memory and layout) the Parameter made then."""
    for name, parameter in list(out.named_parameters(recurse=False)):
        field = module._lua[name]
        if field is None or not bridge().lua.globals().torch.isTensor(field):
            continue
        memory = to_numpy(field)   # numpy's array, or CuPy's for a CUDA tensor
        face = getattr(memory, "__array_interface__", None) or memory.__cuda_array_interface__
        key = (face["data"][0], face["shape"], face["strides"], face["typestr"])
        first = seen.setdefault(key, parameter)
        if first is not parameter and first.shape == parameter.shape:
            setattr(out, name, first)


def _lua_module(module: LuaObject | LuaModule | str) -> LuaObject:
    if isinstance(module, LuaModule):
        return module.lua
    if isinstance(module, str):
        require("nn")
        module = wrap(lua_eval(module))
    if not isinstance(module, LuaObject) or module._lua["updateOutput"] is None:
        raise TypeError(f"convert expects a Lua module, its constructor string or a LuaModule, got {module!r}")
    return module


def convert(module: LuaObject | LuaModule | str, strict: bool = True) -> torch.nn.Module:
    """A native PyTorch module tree for a Lua module (a proxy, a constructor string such as
    ``"nn.Linear(4, 3)"``, or a `LuaModule`), its weights copied. A module with no PyTorch
    counterpart raises `ConversionError` naming its class and path, or with ``strict=False`` stays
    a `LuaModule` (over the same Lua module, not a copy)."""
    return _convert(_lua_module(module), Context("", strict))
