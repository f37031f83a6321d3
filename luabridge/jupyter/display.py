"""What a notebook shows of Lua: Lua's output written to the cell (print, io.write, io.stdout and
io.stderr go through Python's sys.stdout / sys.stderr, which the kernel sends in order with the
rest), pictures (itorch.image, itorch.Plot, image.display, gnuplot's figures) as PNG display data,
and the mime bundle of a Lua value (th's text, a summary past a threshold, a picture for an
image-shaped tensor). The Lua half is lua/luabridge/jupyter/init.lua."""
from __future__ import annotations

import base64
import os
import sys
from typing import Any, Callable

from ..core import interop
from ..core.errors import LuaError
from ..core.proxy import Tensor, image_pixels, lua_kind, png_bytes, wrap
from ..core.runtime import Bridge
from ..th.repl import compile_chunk, load_chunk

CHUNK_NAME = "=cell"   # errors name the cell's line as `cell:3:`
INTERRUPTED = "interrupted!"   # the error Ctrl-C's hook raises in Lua (lua/luabridge/th/interrupt.lua)

Publish = Callable[[dict], None]   # sends one display_data bundle (mime type -> data) to the notebook


def _text(value: Any) -> str:
    return value.encode("utf-8", "surrogateescape").decode("utf-8", "replace") if isinstance(value, str) else str(value)


def write(stream: str, text: Any) -> None:
    """Lua's output: 'stdout' or 'stderr', to Python's stream of that name (the cell's)."""
    target = sys.stderr if stream == "stderr" else sys.stdout
    target.write(_text(text))


def png_of(tensor: Any) -> str:
    """A Lua image tensor (HxW or CxHxW) as base64 PNG text, as notebooks carry it."""
    return base64.b64encode(png_bytes(image_pixels(interop.to_host(tensor)))).decode()


def shower(publish: Publish) -> Callable[[str, Any], None]:
    """The `show(kind, value)` the Lua half calls: 'png' a tensor, 'file' a PNG file (read, then
    removed: the Lua side made it for this), 'html' and 'text' strings."""
    def show(kind: str, value: Any) -> None:
        if kind == "png":
            publish({"image/png": png_of(value), "text/plain": "<image>"})
        elif kind == "file":
            path = _text(value)
            try:
                with open(path, "rb") as f:
                    data = f.read()
            finally:
                if os.path.exists(path):
                    os.remove(path)
            publish({"image/png": base64.b64encode(data).decode(), "text/plain": "<figure>"})
        elif kind == "html":
            publish({"text/html": _text(value), "text/plain": _text(value)})
        else:
            publish({"text/plain": _text(value)})
    return show


def install(b: Bridge, publish: Publish) -> Any:
    """Lua's output to the notebook, itorch and inline pictures, in b's runtime (a second call
    only changes where pictures go). Returns the Lua half."""
    lua_side = b.module("luabridge.jupyter")
    b.call(lua_side.install, write, shower(publish))
    return lua_side


def compile_cell(b: Bridge, code: str) -> tuple[Any, bool]:
    """A cell's function and whether its values are shown: an expression list (th's rule); else
    statements whose last line is an expression (a call too, as IPython shows a last expression's
    value), returned; else statements (a `return`'s values shown). None shown for a cell ending
    in ';'. LuaError with the parser's message when nothing compiles."""
    fn, shown, error = compile_chunk(b, code, CHUNK_NAME)
    quiet = code.rstrip().endswith(";")
    if fn is not None and shown:
        return fn, True
    head, _, last = code.rstrip().rpartition("\n")
    if head.strip() and last.strip() and not quiet:
        with_return, _ = load_chunk(b, f"{head}\nreturn select(1, {last}\n)", CHUNK_NAME)
        if with_return is not None:
            return with_return, True
    if fn is None:
        raise LuaError(error)
    return fn, not quiet


def bundle(b: Bridge, value: Any, layout_print: Any) -> dict:
    """The mime bundle of a Lua value: a tensor as its proxy shows (torch7's print, summarised
    past the threshold; a picture when image-shaped), anything else as th prints it."""
    if lua_kind(value) == "tensor":
        proxy = wrap(value)
        data = {"text/plain": repr(proxy).rstrip("\n")}
        if isinstance(proxy, Tensor):
            png = proxy._repr_png_()
            if png is not None:
                data["image/png"] = base64.b64encode(png).decode()
        return data
    return {"text/plain": _text(b.call(b.module("luabridge.jupyter").text, layout_print, value))}
