"""The `luabridge` command: `luabridge th FILE.lua [args...]` runs Lua like Torch7's `th`."""
from __future__ import annotations

import argparse
import sys
from typing import Sequence

from .errors import LuaError
from .runtime import bridge

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


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: luabridge th [FILE.lua [args...]] [-e CODE] [-i]")
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command == "th":
        return th(rest)
    print(f"luabridge: unknown command {command!r} (try: th)", file=sys.stderr)
    return 2
