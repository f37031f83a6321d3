"""`%load_ext luabridge`: the `%lua` line magic and the `%%lua` cell magic, running Lua in this
process's runtime (the one `luabridge.execute` uses).

    %%lua -i a,b -o c      a and b (Python) become Lua globals of the same names (numpy arrays
                           and PyTorch tensors shared, not copied); after the cell the Lua global
                           c is back in the notebook's namespace, as rpy2's %%R does
    %lua expression        its value is the magic's result (shown as a cell's last expression)

A cell's values are shown (the magic returns one value, or a tuple of several): an expression
list's, a `return`'s, or a last line's that is an expression; none for a cell ending in ';'. Lua's print and io.write go to the cell; Ctrl-C (the
notebook's interrupt) stops running Lua with KeyboardInterrupt, and the runtime goes on."""
from __future__ import annotations

import re
from typing import Any

from IPython.core.magic import Magics, line_cell_magic, magics_class, no_var_expand
from IPython.display import display

from ..core.errors import LuaError
from ..core.proxy import Tensor, unwrap, wrap
from ..core.runtime import bridge
from ..th.interrupt import Interrupter
from . import display as lua_display

_OPTION = re.compile(r"\s*(-i|-o|--input|--output)(?:\s+|=)([A-Za-z_][\w]*(?:\s*,\s*[A-Za-z_]\w*)*)")
_NAME = re.compile(r"^[A-Za-z_]\w*$")


def parse(line: str) -> tuple[list[str], list[str], str]:
    """(inputs, outputs, the rest: the line magic's code) from `-i a,b -o c rest`."""
    inputs: list[str] = []
    outputs: list[str] = []
    while True:
        m = _OPTION.match(line)
        if not m:
            break
        names = [n.strip() for n in m.group(2).split(",")]
        (inputs if m.group(1) in ("-i", "--input") else outputs).extend(names)
        line = line[m.end():]
    rest = line.strip()
    if rest.startswith("-") and not rest.startswith("--"):
        raise ValueError(f"%lua: unknown option {rest.split()[0]!r} (options: -i NAMES, -o NAMES)")
    return inputs, outputs, rest


def _publish(data: dict) -> None:
    display(data, raw=True)


@magics_class
class LuaMagics(Magics):
    def __init__(self, shell: Any) -> None:
        super().__init__(shell)
        self._interrupter: Interrupter | None = None

    def _runtime(self) -> Any:
        b = bridge()
        if self._interrupter is None:
            b.call(b.lua.globals().require, "torch")
            self._interrupter = Interrupter(b, scoped=True)
        self._lua_side = lua_display.install(b, _publish)
        return b

    @no_var_expand   # Lua's tables are {...}: IPython would read them as Python to substitute
    @line_cell_magic
    def lua(self, line: str, cell: str | None = None) -> Any:
        """Runs Lua: `%lua code`, or a `%%lua [-i a,b] [-o c]` cell (see the module's doc)."""
        inputs, outputs, rest = parse(line)
        code = rest if cell is None else cell
        b = self._runtime()
        g = b.lua.globals()
        for name in inputs:
            if name not in self.shell.user_ns:
                raise NameError(f"%lua -i: no Python variable {name!r}")
            g[name] = unwrap(self.shell.user_ns[name])
        fn, show = lua_display.compile_cell(b, code)
        try:
            with self._interrupter:
                count, values = b.call(self._lua_side.run, fn)
                b.call(self._lua_side.flush)
        except LuaError as e:
            if e.message.endswith(lua_display.INTERRUPTED):   # the hook stopped pure Lua code
                raise KeyboardInterrupt(e.message) from None
            raise
        for name in outputs:
            self.shell.user_ns[name] = wrap(g[name])
        if not show or count == 0:
            return None
        results = tuple(wrap(values[i]) for i in range(1, count + 1))
        return results[0] if count == 1 else results


def _lua_value_text(value: Any, printer: Any, cycle: bool) -> None:
    printer.text(repr(wrap(value)))


def _lua_value_png(value: Any) -> bytes | None:
    shown = wrap(value)
    return shown._repr_png_() if isinstance(shown, Tensor) else None


def load(ipython: Any) -> None:
    """The magics, and raw Lua values (what luabridge.execute and eval return) shown as their
    proxies show: a tensor as torch7 prints it (summarised past the threshold, a picture when
    image-shaped), a module as its tree, a table as a list or dict, never `<Lua userdata at 0x...>`."""
    ipython.register_magics(LuaMagics)
    lua_type = type(bridge().lua.globals()).__mro__[-2]   # lupa's base class of Lua tables, functions, userdata
    formatters = ipython.display_formatter.formatters
    formatters["text/plain"].for_type(lua_type, _lua_value_text)
    formatters["image/png"].for_type(lua_type, _lua_value_png)
