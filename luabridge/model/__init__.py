"""Models: handle.py's Model (a picklable handle on a Lua model) and tree.py's naming of a module
tree's parameters and buffers (their Lua halves: lua/luabridge/model/)."""
from .handle import Model

__all__ = ["Model"]
