"""What a module argument names, wherever a constructor string is accepted (`LuaModule`,
`convert`, `export`): a Torch7 file (a `pathlib.Path`, or a string naming an existing file) is
read with luabridge.load; any other string is Lua code that builds the value ("nn.Linear(4, 3)").
A string that is neither says both: ``no such file 'model.t7', and as Lua code: <Lua's error>``
(a `SourceError`: a LuaError and a FileNotFoundError, so either kind of handler takes it).
"""
from __future__ import annotations

import os
from typing import Any

from ..core.errors import LuaError
from ..core.proxy import wrap
from ..core.runtime import eval as lua_eval
from ..core.runtime import require
from ..t7.load import load


class SourceError(LuaError, FileNotFoundError):
    """A string that names no file and does not run as Lua; `message` says both."""


def module_value(given: Any, op: str, format: str = "binary") -> tuple[Any, str | None]:
    """(the value `given` names, the file it was read from or None). A path-like or a string
    naming an existing file is read as a .t7 file (format: binary, ascii, b32 or b64); another
    string runs as Lua code (nn required first) and its value is returned as a proxy; anything
    else is returned as it is. op names the caller in errors."""
    if isinstance(given, os.PathLike) or (isinstance(given, str) and os.path.isfile(given)):
        path = os.fspath(given)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{op}: no such file '{path}'")
        return load(path, format), path
    if not isinstance(given, str):
        return given, None
    require("nn")
    try:
        return wrap(lua_eval(given)), None
    except LuaError as e:
        raise SourceError(f"{op}: no such file '{given}', and as Lua code: {e.message}", e.traceback) from None
