"""`convert`: a Lua Torch7 module tree as a native PyTorch module tree, weights copied.

A converter per torch7 class (`CONVERTERS`, keyed by ``torch.typename``) builds the PyTorch
module; containers convert their children through `Context.child`, which carries the dotted
1-based path used in error messages and applies the strict rule. Converters read the Lua
module's fields through `Context`'s readers (`integer`, `number`, `tensor`, `modules`, ...),
which check each field where it is read: a malformed module (a field of the wrong type or
shape, nil, a gap in `modules`, a cycle) is a `ConversionError` naming its class, path and
field, whatever the converter. The converter files (`convert_layers`, `convert_tables`,
`convert_criterions`, `convert_graph`) import this module and register themselves with
`converter`; the package (luabridge/torch/__init__.py) imports them, so they are registered
before any use of this module.
"""
from __future__ import annotations

import argparse
import contextlib
import math
import os
import sys
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import torch

from ..core.progress import ProgressLine
from ..core.proxy import LuaObject, to_numpy, wrap
from ..core.runtime import bridge
from ..core.runtime import luajit21 as lupa
from .given import module_value
from .module import LuaModule

_REQUIRED = object()   # a reader's default: the field must be there
# The fields through which torch7's containers and decorators hold their children (a module,
# or a table of them); a gModule's also sit in its nodes (`graph_modules`).
CHILD_FIELDS = ("modules", "module", "criterions", "criterion", "inputModule", "targetModule")
# Python frames one level of conversion takes (converter, Context.child, ...), with room to spare
_FRAMES_PER_LEVEL = 12


class ConversionError(ValueError):
    """A module that cannot become a PyTorch one: no counterpart (strict mode), settings the
    counterpart cannot keep, or a malformed module (`malformed`: a field of the wrong type or
    shape, a missing one, a gap in its children, a module containing itself). Names the class,
    its path in the tree (1-based container indices: "3.1") and, for a malformed one, the field.
    A ValueError: the module given is a value that cannot be converted."""

    def __init__(self, typename: str, path: str, reason: str = "has no PyTorch counterpart",
                 field: str | None = None, malformed: bool = False) -> None:
        self.typename, self.path, self.reason, self.field, self.malformed = typename, path, reason, field, malformed
        where = f"{typename} at {path or '<root>'}"
        super().__init__(f"{where}: field {field} {reason}" if field else f"{where} {reason}")


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


# A conversion's progress: called with (modules converted, modules in the tree) after each one.
Progress = Callable[[int, int], None]


class _Shared:
    """What one conversion has made so far, so that what the Lua tree shares stays shared: a Lua
    module met twice becomes one PyTorch module, a Lua tensor held by two modules (clone('weight',
    'bias')) one Parameter. `active`: the modules being converted (those above the current one),
    by pointer, with their paths: meeting one again is a cycle."""

    def __init__(self, progress: Progress | None = None, total: int = 0) -> None:
        self.modules: dict[int, torch.nn.Module] = {}
        self.parameters: dict[tuple, torch.nn.Parameter] = {}
        self.active: dict[int, str] = {}
        self.progress, self.total = progress, total   # told (done, total) after each module converted


def describe(value: Any) -> str:
    """A Lua value as an error message names it: nil, 3, the string 'x', a table, a
    torch.LongTensor of size 4x3."""
    if value is None:
        return "nil"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (str, bytes)):
        return f"the string {value!r}"
    kind = lupa.lua_type(value)
    if kind not in ("table", "userdata"):
        return f"a Lua {kind}"
    lua_torch = bridge().lua.globals().torch
    typename = lua_torch.typename(value)
    if typename is None:
        return "a table"
    if lua_torch.isTensor(value):
        return f"a {typename} of size {'x'.join(map(str, to_numpy(value).shape)) or 'none'}"
    return f"a {typename}"


def is_number(value: Any) -> bool:
    """A Lua number (lupa gives int or float; a boolean is no number)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_plain_table(value: Any) -> bool:
    """A Lua table that is no torch class instance (a list, a record)."""
    return lupa.lua_type(value) == "table" and bridge().lua.globals().torch.typename(value) is None


def is_module(value: Any) -> bool:
    """An nn module or criterion (a raw Lua value)."""
    lua_torch = bridge().lua.globals().torch
    return lupa.lua_type(value) == "table" and bool(
        lua_torch.isTypeOf(value, "nn.Module") or lua_torch.isTypeOf(value, "nn.Criterion"))


class Context:
    """Where a converter is in the tree (`path`: dotted, 1-based, "" at the root) and how strict;
    its readers give a field of the Lua module `m` as the converter needs it, or raise the
    `ConversionError` naming the module, its path and the field."""

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

    def bad(self, m: LuaObject, field: str, reason: str) -> ConversionError:
        """The error for a malformed module of this path: its `field` is not what it must be."""
        return ConversionError(m._typename(), self.path, reason, field, malformed=True)

    # ---- readers

    def raw(self, m: LuaObject, name: str, default: Any = None) -> Any:
        """The field as Lua holds it (lupa's values); nil -> default."""
        value = m._lua[name]
        return default if value is None else value

    def _present(self, m: LuaObject, name: str, default: Any, expected: str) -> Any:
        value = m._lua[name]
        if value is None and default is _REQUIRED:
            raise self.bad(m, name, f"is nil, expected {expected}")
        return value

    def number(self, m: LuaObject, name: str, default: Any = _REQUIRED) -> float:
        """A number field (a float; inf and NaN pass, as Lua computes with them)."""
        value = self._present(m, name, default, "a number")
        if value is None:
            return default
        if not is_number(value):
            raise self.bad(m, name, f"is {describe(value)}, expected a number")
        return float(value)

    def integer(self, m: LuaObject, name: str, default: Any = _REQUIRED, minimum: int | None = None) -> int:
        """An integer field (a Lua number with no fraction), at least `minimum` when given."""
        value = self._present(m, name, default, "an integer")
        if value is None:
            return default
        if not (is_number(value) and float(value).is_integer()):
            raise self.bad(m, name, f"is {describe(value)}, expected an integer")
        if minimum is not None and value < minimum:
            raise self.bad(m, name, f"is {int(value)}, expected at least {minimum}")
        return int(value)

    def integers(self, m: LuaObject, prefix: str, dims: str, default: Any = _REQUIRED,
                 minimum: int | None = None) -> tuple[int, ...]:
        """The per-dimension fields prefix + T/H/W, in PyTorch's order (e.g. kH, kW)."""
        return tuple(self.integer(m, prefix + d, default, minimum) for d in dims)

    def flag(self, m: LuaObject, name: str, default: bool = False) -> bool:
        """A flag field, true as Lua's conditions read it (anything but nil and false)."""
        value = m._lua[name]
        return default if value is None else value is not False

    def string(self, m: LuaObject, name: str, choices: Sequence[str]) -> str:
        """A string field, one of `choices`."""
        value = m._lua[name]
        if value not in choices:
            raise self.bad(m, name, f"is {describe(value)}, expected one of {', '.join(map(repr, choices))}")
        return value

    def tensor(self, m: LuaObject, name: str, dims: Sequence[int] | None = None,
               numel: int | None = None) -> torch.Tensor:
        """A torch CPU copy of a floating-point tensor field holding elements, with one of `dims`
        dimensions and `numel` elements when given."""
        value = self._present(m, name, _REQUIRED, "a tensor")
        lua_torch = bridge().lua.globals().torch
        if not lua_torch.isTensor(value):
            raise self.bad(m, name, f"is {describe(value)}, expected a tensor")
        out = tensor(value)
        if not (out.is_floating_point() and out.numel()) or (dims is not None and out.dim() not in dims):
            shape = " or ".join(f"{d}-D" for d in dims) + " " if dims else ""
            raise self.bad(m, name, f"is {describe(value)}, expected a {shape}floating-point tensor holding elements")
        if numel is not None and out.numel() != numel:
            raise self.bad(m, name, f"is {describe(value)}, expected {numel} elements")
        return out

    def optional_tensor(self, m: LuaObject, name: str, numel: int | None = None) -> torch.Tensor | None:
        """`tensor`, or None where the field is nil."""
        return None if m._lua[name] is None else self.tensor(m, name, numel=numel)

    def copy_into(self, module: torch.nn.Module, m: LuaObject, *names: str) -> torch.nn.Module:
        """Copies the Lua module's tensors `names` (those it has) into module's, reshaped to them."""
        with torch.no_grad():
            for name in names:
                if m._lua[name] is not None:
                    target = getattr(module, name)
                    if target is None:   # a batch normalization's bias without its weight
                        raise self.fail(m, f"has a {name} that its PyTorch counterpart cannot have (field {name})")
                    target.copy_(self.tensor(m, name, numel=target.numel()).reshape(target.shape))
        return module

    def module(self, m: LuaObject, name: str) -> LuaObject:
        """A field holding one module (or criterion)."""
        value = self._present(m, name, _REQUIRED, "a module")
        if not is_module(value):
            raise self.bad(m, name, f"is {describe(value)}, expected a module")
        return wrap(value)

    def modules(self, m: LuaObject, name: str = "modules") -> list[LuaObject]:
        """A field holding a list of modules (or criterions): a table with keys 1..n, no gaps."""
        value = self._present(m, name, _REQUIRED, "a table of modules")
        if not is_plain_table(value):
            raise self.bad(m, name, f"is {describe(value)}, expected a table of modules")
        keys = list(value.keys())
        n = len(keys)
        if any(not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= n for k in keys):
            listed = ", ".join(map(repr, sorted(keys, key=repr)[:8]))
            raise self.bad(m, name, f"has the keys {listed}: a gap, or keys that are not 1..n")
        out = []
        for i in range(1, n + 1):
            if not is_module(value[i]):
                raise self.bad(m, f"{name}[{i}]", f"is {describe(value[i])}, expected a module")
            out.append(wrap(value[i]))
        return out

    def numbers(self, m: LuaObject, name: str, count: int | None = None) -> list[float]:
        """A field holding numbers: a storage, a 1-D tensor or a table (keys 1..n); `count` of them
        when given."""
        value = self._present(m, name, _REQUIRED, "numbers")
        lua_torch = bridge().lua.globals().torch
        if lua_torch.isStorage(value):
            numbers = list(wrap(value).tolist())
        elif lua_torch.isTensor(value) and value.nDimension(value) <= 1:
            numbers = np.array(wrap(value)).ravel().tolist()
        elif is_plain_table(value):
            numbers = [value[i] for i in range(1, len(value) + 1)]
            if len(numbers) != len(list(value.keys())):
                numbers.append(None)   # other keys than 1..n: not a list
        else:
            numbers = None
        if numbers is None or not all(map(is_number, numbers)):
            raise self.bad(m, name, f"is {describe(value)}, expected numbers (a storage or a table of numbers)")
        if count is not None and len(numbers) != count:
            raise self.bad(m, name, f"holds {len(numbers)} numbers, expected {count}")
        return [float(x) for x in numbers]

    def sizes(self, m: LuaObject, name: str) -> list[int]:
        """A field of sizes: a LongStorage or a table of integers."""
        numbers = self.numbers(m, name)
        if not all(math.isfinite(x) and x.is_integer() for x in numbers):
            raise self.bad(m, name, f"holds {numbers!r}, expected integers")
        return [int(x) for x in numbers]


def tensor(t: Any) -> torch.Tensor:
    """A torch CPU copy of a Lua tensor (proxy or raw; a CUDA one is copied to the host), of the
    same dtype."""
    return torch.from_numpy(np.array(wrap(t), copy=True))


def _convert(module: LuaObject, ctx: Context) -> torch.nn.Module:
    key = bridge().lua.globals().torch.pointer(module._lua)
    if key in ctx.shared.active:   # a cycle the walk did not see (through a gModule's nodes)
        first = ctx.shared.active[key] or "<root>"
        raise ConversionError(module._typename(), ctx.path, f"contains itself (it is the module at {first}): "
                              "a module tree has no cycles", malformed=True)
    if key not in ctx.shared.modules:
        ctx.shared.active[key] = ctx.path
        try:
            ctx.shared.modules[key] = _convert_new(module, ctx)
        finally:
            del ctx.shared.active[key]
        if ctx.shared.progress is not None:
            done = len(ctx.shared.modules)
            ctx.shared.progress(done, max(done, ctx.shared.total))
    return ctx.shared.modules[key]


def _convert_new(module: LuaObject, ctx: Context) -> torch.nn.Module:
    typename = module._typename()
    fn = CONVERTERS.get(typename)
    try:
        if fn is None:
            raise ConversionError(typename, ctx.path)
        out = fn(module, ctx)
    except ConversionError as e:   # no counterpart, or settings the counterpart cannot keep
        if ctx.strict or e.path != ctx.path or e.malformed:
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


def _lua_module(module: LuaObject | LuaModule | str | os.PathLike) -> LuaObject:
    if isinstance(module, LuaModule):
        return module.lua
    if isinstance(module, (str, os.PathLike)):
        module = module_value(module, "convert")[0]
    elif lupa.lua_type(module) == "table":   # a raw Lua table, as luabridge.execute returns it
        module = wrap(module)
    if not isinstance(module, LuaObject) or module._lua["updateOutput"] is None:
        raise TypeError(f"convert expects a Lua module, its constructor string, a .t7 file holding one or a LuaModule, "
                        f"got {module!r}")
    return module


def tree_size(module: Any) -> int:
    """The number of modules in a Lua module's tree (raw or proxy), walked without recursion;
    a module holding itself (directly or through others) is a ConversionError naming it."""
    b = bridge()
    shape = b.call(b.module("luabridge.model.tree").shape, module._lua if isinstance(module, LuaObject) else module)
    if isinstance(shape, tuple):
        count, typename, path, first = shape
        raise ConversionError(str(typename), path, f"contains itself (it is the module at {first or '<root>'}): "
                              "a module tree has no cycles", malformed=True)
    return int(shape)


@contextlib.contextmanager
def recursion_room(levels: int) -> Iterator[None]:
    """Python's recursion limit raised for `levels` more levels of module nesting, then put back:
    conversion, torch.save and PyTorch's own module walks recurse once per level. Safe to raise:
    the calls of one level are Python-to-Python calls, which take no C stack."""
    old = sys.getrecursionlimit()
    raised = old + _FRAMES_PER_LEVEL * levels
    sys.setrecursionlimit(raised)
    try:
        yield
    finally:
        if sys.getrecursionlimit() == raised:   # unless someone changed it meanwhile
            sys.setrecursionlimit(old)


def convert(module: LuaObject | LuaModule | str | os.PathLike, strict: bool = True,
            progress: Progress | None = None) -> torch.nn.Module:
    """A native PyTorch module tree for a Lua module (a proxy, a constructor string such as
    ``"nn.Linear(4, 3)"``, a .t7 file holding one (a `pathlib.Path` or an existing file's name),
    or a `LuaModule`), its weights copied. A module with no PyTorch
    counterpart raises `ConversionError` naming its class and path, or with ``strict=False`` stays
    a `LuaModule` (over the same Lua module, not a copy). A malformed module (a field of the
    wrong type or shape, a gap in its children, a cycle) is a ConversionError in either mode,
    naming its class, path and field. Any depth of nesting converts. `progress`, when given, is
    called as progress(done, total) after each module is converted (total: the tree's modules;
    `ConversionProgress` prints it)."""
    lua_module = _lua_module(module)
    total = tree_size(lua_module)
    with recursion_room(total):
        return _convert(lua_module, Context("", strict, _Shared(progress, total)))


class ConversionProgress:
    """A `convert` progress that writes to `stream`: a line each time another `every` percent of
    the modules is converted ("LABEL: 40% (400 of 1,000 modules)"), on one line rewritten in
    place (carriage returns) when stream is a terminal; nothing for trees of fewer than
    `min_total` modules. `close()` ends a line left open."""

    def __init__(self, stream: Any, label: str, every: float = 10.0, min_total: int = 1) -> None:
        self.line, self.label, self.every, self.min_total = ProgressLine(stream), label, every, min_total
        self.shown = -1.0

    def __call__(self, done: int, total: int) -> None:
        if total < self.min_total:
            return
        step = (100.0 * done / total) // self.every * self.every
        if step <= self.shown:
            return
        self.shown = step
        self.line.show(f"{self.label}: {step:.0f}% ({done:,} of {total:,} modules)", last=done >= total)

    def close(self) -> None:
        self.line.close()


def add_progress_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="say on stderr how far the conversion is, every 10%% of the modules (default: when "
                        f"stdout is a terminal and the model has {LONG_CONVERSION} modules or more)")


LONG_CONVERSION = 50   # modules: a tree that takes long enough to convert for progress on a terminal


def command_progress(asked: bool | None, label: str) -> ConversionProgress | None:
    """The progress a command shows (--progress / --no-progress, else on a terminal for long
    conversions), written to stderr so that stdout stays the command's result."""
    if asked is False or (asked is None and not sys.stdout.isatty()):
        return None
    return ConversionProgress(sys.stderr, label, min_total=1 if asked else LONG_CONVERSION)
