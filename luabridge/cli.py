"""The `luabridge` command: `luabridge th FILE.lua [args...]` runs Lua like Torch7's `th`;
`luabridge info FILE.t7` prints what a Torch7 file holds (read in pure Python, no Lua runs)."""
from __future__ import annotations

import argparse
import itertools
import os
import sys
from typing import Any, Sequence

import numpy as np

from . import t7
from .errors import LuaError
from .runtime import bridge
from .t7 import Key, TorchObject

_PROMPT_HELP = "luabridge th: LuaJIT with torch loaded. Ctrl-D exits; '= expr' prints expr."


def _set_arg(script: str, args: Sequence[str]) -> None:
    lua = bridge().lua
    table = lua.table_from([script, *args])  # 1-based: arg[1] is the first argument
    lua.execute("local t, script = ... ; arg = {} ; arg[0] = script ; for i = 2, #t do arg[i - 1] = t[i] end",
                table, script)


def _run_chunk(code: str, name: str) -> None:
    b = bridge()
    b.call(b.load(code, name))


def _interactive() -> int:
    b = bridge()
    print(_PROMPT_HELP)
    while True:
        try:
            line = input("th> ")
        except EOFError:
            print()
            return 0
        except KeyboardInterrupt:
            print()
            continue
        if not line.strip():
            continue
        expr = line[1:] if line.startswith("=") else line
        try:
            # an expression list if it parses as one; select(1, ...) passes its values through
            # without a tail call, so an error raised by the expression keeps its "stdin:1:"
            fn = b.lua.globals().loadstring(f"return select(1, {expr}\n)", "=stdin")
            if not callable(fn) or isinstance(fn, tuple):
                fn = b.load("return " + expr if line.startswith("=") else line, "=stdin")
            result = b.call(fn)
        except LuaError as e:
            print(e.message, file=sys.stderr)
            continue
        if result is not None:
            values = result if isinstance(result, tuple) else (result,)
            b.lua.globals().print(*values)


def th(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="luabridge th", description="Run Lua Torch7 code (torch preloaded).")
    p.add_argument("-e", dest="code", action="append", help="run this Lua code (may repeat)")
    p.add_argument("-i", dest="interactive", action="store_true", help="enter the prompt after running")
    p.add_argument("script", nargs="?", help="a Lua file")
    p.add_argument("args", nargs=argparse.REMAINDER, help="arguments, seen by the script as arg[1..n]")
    a = p.parse_args(argv)
    b = bridge()
    try:
        b.call(b.lua.globals().require, "torch")
        _set_arg(a.script or "", a.args)
        for code in a.code or []:
            _run_chunk(code, "=(command line)")
        if a.script:
            b.call(b.lua.globals().dofile, a.script)
    except LuaError as e:
        print(e.message, file=sys.stderr)
        if e.traceback:
            print(e.traceback.strip(), file=sys.stderr)
        return 1
    finally:
        sys.stdout.flush()
    if a.interactive or (not a.script and not a.code):
        return _interactive()
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


def _module_lines(module: Any, indent: str, label: str, tally: _Tally, depth: int = 0) -> list[str]:
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
        lines += _module_lines(child, indent + " " * len(label) + "  ", child_label + " ", tally, depth + 1)
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
        return f"<key {_brief(value.value)}>"
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
        lines.append(f"{indent}  {key}: {sub[0].lstrip()}")
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
        value = t7.read(a.file, a.format, functions="skip")
    except (OSError, t7.T7Error) as e:
        print(f"luabridge info: {e}", file=sys.stderr)
        return 1
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


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: luabridge th [FILE.lua [args...]] [-e CODE] [-i]\n"
              "       luabridge info FILE.t7 [--format binary|ascii|b32|b64]")
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command == "th":
        return th(rest)
    if command == "info":
        return info(rest)
    print(f"luabridge: unknown command {command!r} (try: th, info)", file=sys.stderr)
    return 2
