"""The Lua kernel for Jupyter, in iTorch's place: cells are Lua run as `luabridge th` runs them
(torch, paths, sys, xlua and dok loaded, th's print), their values shown (tensors summarised
past a threshold, image-shaped tensors as pictures, tables laid out), `itorch.image`,
`itorch.Plot`, `itorch.html`, `itorch.text`, `image.display` and gnuplot's figures inline, Tab
completing names and `t:` methods as th does, and the notebook's interrupt stopping running Lua
as Ctrl-C does in th (luabridge/th/interrupt.py). Built on ipykernel's Kernel base class.

    python -m luabridge.kernel install [--user | --prefix P | --sys-prefix]   the kernelspec 'luabridge'
    python -m luabridge.kernel -f CONNECTION_FILE                               what the kernelspec starts
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any, Sequence

from ipykernel.kernelbase import Kernel

from ..core.errors import LuaError
from ..core.runtime import bridge
from ..core.version import __version__
from ..th.interrupt import Interrupter
from ..th.repl import complete, is_unfinished, load_chunk, preload
from . import display

KERNEL_NAME = "luabridge"
DISPLAY_NAME = "Lua (luabridge, Torch7)"
# what readline breaks words at in th: everything but identifier characters, '.' and ':'
_WORD = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.:")


def word_before(code: str, cursor: int) -> tuple[str, int]:
    """The name or path ending at the cursor (th's completion word) and where it starts."""
    start = cursor
    while start > 0 and code[start - 1] in _WORD:
        start -= 1
    return code[start:cursor], start


class LuaKernel(Kernel):
    implementation = "luabridge"
    implementation_version = __version__
    language = "lua"
    language_version = "5.1 (LuaJIT)"
    language_info = {"name": "lua", "mimetype": "text/x-lua", "file_extension": ".lua",
                     "codemirror_mode": "lua", "pygments_lexer": "lua", "version": "5.1"}
    banner = "luabridge: Torch7 on LuaJIT (torch loaded; itorch.image, itorch.Plot, itorch.html)"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.b = bridge()
        preload(self.b)
        g = self.b.lua.globals()
        self._layout_print = g.print            # th's print, which lays tables out
        self.lua = display.install(self.b, self._publish)
        g.print = self._layout_print            # through io.write, which now goes to the cell
        self.interrupter = Interrupter(self.b, scoped=True)

    # ipykernel sets Python's SIGINT handler around each request: the interrupter sets its own
    # around each Lua run and puts this one back after it.

    def set_parent(self, ident: Any, parent: dict, channel: str = "shell") -> None:
        """Lua's output (Python's sys.stdout / sys.stderr) goes to the request that runs, as
        IPython's kernel does it: ipykernel's streams send nothing without a parent."""
        super().set_parent(ident, parent, channel)
        if channel == "shell":
            for stream in (sys.stdout, sys.stderr):
                if hasattr(stream, "set_parent"):
                    stream.set_parent(parent)

    def _publish(self, data: dict) -> None:
        self.send_response(self.iopub_socket, "display_data", {"data": data, "metadata": {}})

    def _error(self, name: str, value: str, tb: list[str]) -> dict:
        content = {"ename": name, "evalue": value, "traceback": tb}
        self.send_response(self.iopub_socket, "error", content)
        return {"status": "error", "execution_count": self.execution_count, **content}

    def do_execute(self, code: str, silent: bool, store_history: bool = True,
                   user_expressions: dict | None = None, allow_stdin: bool = False, **kwargs: Any) -> dict:
        if not code.strip():
            return {"status": "ok", "execution_count": self.execution_count, "payload": [], "user_expressions": {}}
        try:
            fn, show = display.compile_cell(self.b, code)
            with self.interrupter:
                count, values = self.b.call(self.lua.run, fn)
                self.b.call(self.lua.flush)
            if show and not silent and count > 0:
                for i in range(1, count + 1):
                    self.send_response(self.iopub_socket, "execute_result", {
                        "execution_count": self.execution_count, "metadata": {},
                        "data": display.bundle(self.b, values[i], self._layout_print)})
        except KeyboardInterrupt:
            return self._error("KeyboardInterrupt", "interrupted", ["KeyboardInterrupt: interrupted"])
        except LuaError as e:
            if e.message.endswith(display.INTERRUPTED):
                return self._error("KeyboardInterrupt", e.message, str(e).splitlines())
            return self._error("LuaError", e.message, str(e).splitlines())
        except Exception as e:  # a Python callback's own error (raised through Lua)
            return self._error(type(e).__name__, str(e), traceback.format_exception(e))
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
        return {"status": "ok", "execution_count": self.execution_count, "payload": [], "user_expressions": {}}

    def do_complete(self, code: str, cursor_pos: int | None) -> dict:
        cursor = len(code) if cursor_pos is None else cursor_pos
        word, start = word_before(code, cursor)
        matches = [m.rstrip(" ") for m in complete(self.b, word)] if word else []
        return {"status": "ok", "matches": matches, "cursor_start": start, "cursor_end": cursor, "metadata": {}}

    def do_is_complete(self, code: str) -> dict:
        fn, error = load_chunk(self.b, code)
        if fn is None and is_unfinished(self.b, code, error):
            return {"status": "incomplete", "indent": ""}
        return {"status": "complete" if fn is not None else "invalid"}


# the kernelspec -----------------------------------------------------------------------------------

def kernelspec() -> dict:
    """kernel.json: this Python running `-m luabridge.kernel` on the connection file."""
    return {"argv": [sys.executable, "-m", "luabridge.kernel", "-f", "{connection_file}"],
            "display_name": DISPLAY_NAME, "language": "lua", "interrupt_mode": "signal",
            "metadata": {"debugger": False}}


def install(user: bool = False, prefix: str | None = None) -> str:
    """Installs the kernelspec 'luabridge' (for this user, under a prefix, or system-wide) and
    returns the folder it went to."""
    from jupyter_client.kernelspec import KernelSpecManager

    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "kernel.json").write_text(json.dumps(kernelspec(), indent=1))
        return KernelSpecManager().install_kernel_spec(tmp, KERNEL_NAME, user=user, prefix=prefix)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["install"]:
        p = argparse.ArgumentParser(prog="python -m luabridge.kernel install",
                                    description="Installs the Jupyter kernelspec 'luabridge' (Lua with torch).")
        where = p.add_mutually_exclusive_group()
        where.add_argument("--user", action="store_true", help="for this user (~/.local/share/jupyter)")
        where.add_argument("--prefix", help="under this prefix (PREFIX/share/jupyter/kernels)")
        where.add_argument("--sys-prefix", action="store_true", help="under this Python's prefix (a venv's)")
        o = p.parse_args(args[1:])
        folder = install(user=o.user, prefix=sys.prefix if o.sys_prefix else o.prefix)
        print(f"installed the kernelspec {KERNEL_NAME!r} in {folder}")
        return 0
    from ipykernel.kernelapp import IPKernelApp

    IPKernelApp.launch_instance(argv=args, kernel_class=LuaKernel)
    return 0
