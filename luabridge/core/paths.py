"""Where luabridge's Lua sources are (a module of its own: the element-type and .t7 tables are
read from there while the runtime itself is still being imported)."""
from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parents[1]   # luabridge/ (this file is luabridge/core/paths.py)


def lua_dir() -> Path:
    """The directory holding luabridge's Lua sources (inside the package when installed)."""
    inside = _PACKAGE / "lua"
    return inside if inside.is_dir() else _PACKAGE.parent / "lua"
