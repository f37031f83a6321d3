"""The `luabridge` command: `luabridge th [options] [FILE.lua [args...]]` runs Lua like Torch7's
`th` (trepl); `luabridge info FILE.t7` prints what a Torch7 file holds (read in pure Python, no Lua
runs); `luabridge convert MODEL.t7 OUT.pt` writes a Torch7 model as a native PyTorch module;
`luabridge export MODEL.t7 OUTDIR` writes it as PyTorch source and weights that need PyTorch alone."""
from __future__ import annotations

import argparse
import itertools
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from .. import t7
from ..core.errors import LuaError
from ..core.runtime import bridge, take_lua52_notice
from ..core.version import __version__
from ..t7 import Key, TorchObject
from .interrupt import Interrupter
from .repl import PRELOADED, Prompt, preload

TH_USAGE = f"""\
usage: luabridge th [options] [script.lua | - [arguments]]

Runs Lua Torch7 code as Torch7's th does: {', '.join(PRELOADED)} are loaded, print lays out
tables, and without a script or statement a prompt opens (line editing, history, Tab completion).
The script sees its arguments as arg[1..n], and its own path as arg[0]. A script named -
is read from standard input (as `lua -` reads it; arg[0] is "-").

options:
  -l NAME            load library NAME first (require), e.g. -l nn; may repeat
  -e STATEMENT       run STATEMENT; may repeat, runs in order with -l
  -i, --interactive  open the prompt after the script or statements
  -h, --help         print this help
  --version          print the versions of luabridge and LuaJIT"""

USAGE = """\
usage: luabridge COMMAND [options]

commands:
  th [options] [script.lua [args...]]
        run Lua Torch7 code as Torch7's th: a script with its arguments, -e statements,
        -l libraries, or the interactive prompt (see luabridge th -h)
  info FILE.t7 [--format binary|ascii|b32|b64]
        print what a Torch7 file holds: a model's modules and parameters, or an outline of
        any other value; read in Python, without running Lua (see luabridge info -h)
  convert MODEL.t7 OUT.pt [--no-strict] [--progress] [--format binary|ascii|b32|b64]
        convert a Torch7 nn model into a native PyTorch module, saved with torch.save;
        needs PyTorch, and luabridge to load it (see luabridge convert -h)
  export MODEL.t7 OUTDIR [--onnx] [--pt2] [--pt] [--progress] [--input-size 1x3x32x32]
        write a Torch7 nn model as OUTDIR/model.py (plain torch.nn) and model.safetensors,
        which need PyTorch alone; optionally ONNX and torch.export (see luabridge export -h)

options:
  -h, --help   print this help
  --version    print the version"""


@dataclass
class ThOptions:
    steps: list[tuple[str, str]] = field(default_factory=list)  # ("lib", name) or ("exec", code)
    interactive: bool = False
    script: str | None = None
    args: list[str] = field(default_factory=list)


def _th_options(argv: Sequence[str]) -> ThOptions | int:
    """The options before the script, as trepl reads them; everything after the script is its
    own. An int is the exit status when there is nothing to run (help, version, a bad option)."""
    o = ThOptions()
    rest = list(argv)
    while rest:
        a = rest.pop(0)
        if a in ("-h", "--help"):
            print(TH_USAGE)
            return 0
        if a == "--version":
            print(f"luabridge th {__version__} ({bridge().lua.globals().jit.version})")
            return 0
        if a in ("-i", "--interactive"):
            o.interactive = True
        elif a in ("-e", "-l"):
            if not rest:
                print(f"luabridge th: {a} needs an argument\n{TH_USAGE}", file=sys.stderr)
                return 2
            o.steps.append(("exec" if a == "-e" else "lib", rest.pop(0)))
        elif a.startswith("-l") and len(a) > 2:  # -lnn
            o.steps.append(("lib", a[2:]))
        elif a.startswith("-") and a != "-":
            print(f"luabridge th: unknown option {a}\n{TH_USAGE}", file=sys.stderr)
            return 2
        else:
            o.script, o.args = a, rest
            break
    return o


def _set_arg(script: str, args: Sequence[str]) -> None:
    lua = bridge().lua
    table = lua.table_from([script, *args])  # 1-based: arg[1] is the first argument
    lua.execute("local t, script = ... ; arg = {} ; arg[0] = script ; for i = 2, #t do arg[i - 1] = t[i] end",
                table, script)


def th(argv: Sequence[str]) -> int:
    o = _th_options(argv)
    if isinstance(o, int):
        return o
    # on the stock lupa: said once, to a person at a terminal (scripts' stderr is often parsed),
    # and never as a Python warning
    notice = take_lua52_notice()
    if notice and sys.stderr.isatty():
        print(f"luabridge th: {notice}", file=sys.stderr)
    b = bridge()
    g = b.lua.globals()
    interrupter = Interrupter(b)
    try:
        _set_arg(o.script or "", o.args)
        with interrupter:
            preload(b)
            for kind, value in o.steps:
                if kind == "exec":
                    b.call(b.load(value, "=(command line)"))
                    continue
                try:
                    b.call(g.require, value)
                except LuaError as e:  # as trepl: say so and go on
                    print(f"could not load {value}, skipping", file=sys.stderr)
                    print(e, file=sys.stderr)  # the message, then the traceback
            if o.script == "-":   # as `lua -`: the script is standard input, its arguments `...` too
                b.call(b.load(sys.stdin.read(), "=stdin"), *o.args)
            elif o.script:
                b.call(g.dofile, o.script)
    except LuaError as e:
        g.io.stdout.flush(g.io.stdout)
        print(e, file=sys.stderr)
        return 1
    finally:
        sys.stdout.flush()
    ran = o.script or any(kind == "exec" for kind, _ in o.steps)
    if o.interactive or not ran:
        return Prompt(b, interrupter).loop()
    return 0


# `luabridge info`: a module tree for models, a compact summary for anything else
_NOT_PARAMETERS = ("output", "gradInput", "finput", "fgradInput")
_LIST_LIMIT = 12


def _is_module(value: Any) -> bool:

    return isinstance(value, TorchObject) and (value.typename.split(".")[0] in ("nn", "cudnn", "cunn")
                                               or ("output" in value and "gradInput" in value))


def _shape(a: Any) -> str:
    return "x".join(map(str, a.shape)) or "scalar"


def _module_tensors(module: Any) -> list[tuple[str, Any]]:
    """The parameters and buffers of one module: its floating-point array fields, less gradients
    and outputs (integer arrays are settings, such as nn.View's size)."""

    return [(k, v) for k, v in module.items() if isinstance(v, np.ndarray) and isinstance(k, str)
            and v.dtype.kind == "f" and k not in _NOT_PARAMETERS and not k.startswith(("grad", "_")) and v.size]


def _module_children(module: Any) -> list[tuple[str, Any]]:
    subs = module.get("modules")
    if isinstance(subs, list):
        return [(f"({i})", m) for i, m in enumerate(subs, 1) if _is_module(m)]
    if isinstance(subs, dict):
        return [(f"({k})", m) for k, m in subs.items() if _is_module(m)]
    single = module.get("module")
    return [("(module)", single)] if _is_module(single) else []


class _Tally:
    """Parameter and buffer counts, each array counted once."""

    def __init__(self) -> None:
        self.seen: set[int] = set()
        self.params = self.buffers = self.tensors = 0
        self.dtypes: set[str] = set()

    def add(self, name: str, a: Any) -> None:
        if id(a) in self.seen:
            return
        self.seen.add(id(a))
        self.tensors += 1
        self.dtypes.add(str(a.dtype))
        if name.startswith("running_"):
            self.buffers += a.size
        else:
            self.params += a.size


def _module_lines(module: Any, indent: str, label: str, tally: _Tally, depth: int = 0,
                  above: tuple[int, ...] = ()) -> list[str]:
    """The module's line, its tensors' and its children's; `above`: the ids of the modules holding
    it (one of them met again is a cycle, said, not followed)."""
    if id(module) in above:
        return [f"{indent}{label}{module.typename} (contains itself: a cycle, not followed)"]
    lines = [f"{indent}{label}{module.typename}"]
    pad = indent + " " * len(label) + "  "
    order = {"weight": 0, "bias": 1}
    tensors = sorted(_module_tensors(module), key=lambda kv: (order.get(kv[0], 2), kv[0]))
    width = max((len(k) for k, _ in tensors), default=0)
    for name, a in tensors:
        tally.add(name, a)
        lines.append(f"{pad}{name.ljust(width)}  {str(a.dtype):8} {_shape(a)}")
    for child_label, child in _module_children(module):
        if depth > 100:
            lines.append(f"{pad}...")
            break
        lines += _module_lines(child, indent + " " * len(label) + "  ", child_label + " ", tally, depth + 1,
                               (*above, id(module)))
    return lines


def _is_flat(value: list) -> bool:
    return all(isinstance(v, (int, float, str, bytes)) for v in value[:1000])


def _brief(value: Any) -> str:


    if isinstance(value, np.ndarray):
        return f"array {value.dtype} {_shape(value)}"
    if isinstance(value, TorchObject):
        return f"{value.typename} ({len(value.fields)} fields)"
    if isinstance(value, dict):
        return f"table of {len(value)} entries"
    if isinstance(value, list):
        if _is_flat(value):
            text = repr(value)
            return f"list of {len(value)}: {text if len(text) <= 60 else text[:56] + ' ...]'}"
        return f"list of {len(value)}"
    if isinstance(value, Key):
        return f"<key: {_brief(value.value)}>"
    if value is None or isinstance(value, bool):
        return {None: "nil", True: "true", False: "false"}[value]
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _value_lines(value: Any, indent: str, tally: _Tally, seen: set[int], depth: int = 0) -> list[str]:
    """A compact outline: containers opened a few levels deep, modules as trees."""

    if _is_module(value):
        return _module_lines(value, indent, "", tally)
    lines = [indent + _brief(value)]
    if (not isinstance(value, (dict, list, TorchObject)) or id(value) in seen or depth >= 3
            or isinstance(value, list) and _is_flat(value)):
        return lines
    seen.add(id(value))
    items = value.items() if not isinstance(value, list) else enumerate(value, 1)
    for key, item in itertools.islice(items, _LIST_LIMIT):
        sub = _value_lines(item, indent + "    ", tally, seen, depth + 1)
        lines.append(f"{indent}  {_brief(key) if isinstance(key, Key) else key}: {sub[0].lstrip()}")
        lines += sub[1:]
    size = len(value.fields if isinstance(value, TorchObject) else value)
    if size > _LIST_LIMIT:
        lines.append(f"{indent}  ... {size - _LIST_LIMIT} more")
    return lines


def info(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="luabridge info",
                                description="Print what a Torch7 .t7 file holds (read in Python; no Lua runs).")
    p.add_argument("file", help="a .t7 file")
    p.add_argument("--format", default="binary", choices=t7.FORMATS)
    a = p.parse_args(argv)

    try:
        value = t7.read(a.file, a.format, functions="mark")
    except OSError as e:
        return _failed("info", f"{a.file}: {e.strerror or e}")
    except t7.T7Error as e:
        return _failed("info", str(e))
    tally = _Tally()
    try:
        print(f"{a.file}:")
        for line in _value_lines(value, "  ", tally, set()):
            print(line)
        if tally.tensors:
            buffers = f" + {tally.buffers:,} in buffers (running_*)" if tally.buffers else ""
            print(f"parameters: {tally.params:,}{buffers} in {tally.tensors} tensors "
                  f"({', '.join(sorted(tally.dtypes))})")
        sys.stdout.flush()
    except BrokenPipeError:  # `luabridge info big.t7 | head`: the reader stopped early
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no error at exit's flush
    return 0


CONVERT_EPILOG = """\
The file holds the whole module (its classes, not only weights); load it with
  torch.load("OUT.pt", weights_only=False)
in a Python that can import luabridge (the converted table layers and nngraph graphs are
luabridge.torch classes). Needs PyTorch: pip install 'luabridge[torch]'. For files that need
PyTorch alone (model.py and model.safetensors, optionally ONNX): luabridge export."""


def convert(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="luabridge convert", epilog=CONVERT_EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                description="Convert a Torch7 nn model (.t7) into a native PyTorch module "
                                            "(weights copied) and save it with torch.save.")
    p.add_argument("model", help="a .t7 file holding an nn module (nn.Sequential, nn.gModule, ...)")
    p.add_argument("out", help="the .pt file to write")
    p.add_argument("--no-strict", action="store_true",
                   help="keep a module with no PyTorch counterpart as a luabridge.torch.LuaModule instead of "
                        "failing (it still runs Lua: loading the file needs luabridge and that module's classes)")
    p.add_argument("--format", default="binary", choices=t7.FORMATS)
    try:
        import torch

        from ..torch.convert import (ConversionError, add_progress_option, command_progress, convert as to_torch,
                                     recursion_room, tree_size)
    except ImportError as e:
        p.parse_args(argv)
        return _failed("convert", f"needs PyTorch ({e}): pip install 'luabridge[torch]'")
    add_progress_option(p)
    a = p.parse_args(argv)

    def fail(message: str) -> int:
        return _failed("convert", message)

    from ..t7.load import load
    from ..core.proxy import LuaObject

    folder = os.path.dirname(a.out) or "."
    if not os.path.isdir(folder):   # said before the model is read and converted
        return fail(f"{a.out}: no such folder {folder}")
    try:
        model = load(a.model, a.format)
    except LuaError as e:
        return fail(e.message)
    if not (isinstance(model, LuaObject) and bridge().lua.globals().torch.isTypeOf(model._lua, "nn.Module")):
        what = model._typename() if isinstance(model, LuaObject) else type(model).__name__
        return fail(f"{a.model} holds a {what}, not an nn module")
    progress = command_progress(a.progress, "luabridge convert")
    try:
        levels = tree_size(model)
        module = to_torch(model, strict=not a.no_strict, progress=progress)
    except ConversionError as e:
        hint = "" if e.malformed else " (--no-strict keeps such modules as LuaModules)"
        return fail(f"{a.model}: {e}{hint}")
    finally:
        if progress is not None:
            progress.close()
    with recursion_room(levels):   # pickling and PyTorch's module walks recurse once per level
        try:
            with t7.replacing(a.out) as f:
                torch.save(module, f)
        except OSError as e:
            return fail(f"{a.out}: {e.strerror or e}")
        count = sum(p.numel() for p in module.parameters())
    print(f"{a.out}: {type(module).__name__}, {count:,} parameters")
    return 0


def export(argv: Sequence[str]) -> int:
    """`luabridge export`: luabridge.torch.export's command (it needs PyTorch and safetensors)."""
    try:
        from ..torch.export import main as export_main
    except ImportError as e:
        return _failed("export", f"needs PyTorch and safetensors ({e}): pip install 'luabridge[export]'")
    return export_main(argv)


def _failed(command: str, message: str) -> int:
    """Says what was wrong, on one line, for `luabridge <command>`; the exit status."""
    print(f"luabridge {command}: {message}", file=sys.stderr)
    return 1


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    if argv[0] == "--version":
        print(f"luabridge {__version__}")
        return 0
    command, rest = argv[0], argv[1:]
    if command == "th":
        return th(rest)
    if command == "info":
        return info(rest)
    if command == "convert":
        return convert(rest)
    if command == "export":
        return export(rest)
    print(f"luabridge: unknown command {command!r} (try: th, info, convert, export; luabridge --help)",
          file=sys.stderr)
    return 2
