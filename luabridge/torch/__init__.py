"""PyTorch bridge: Lua Torch7 modules inside PyTorch models, native
conversion (convert, load_lua), export as standalone PyTorch source and weights (export) and
staged graph functions on torch tensors (function).

PyTorch is optional: ``import luabridge`` never imports it; importing this package needs it.
"""
try:
    import torch as _torch  # noqa: F401 - fails here, clearly, when PyTorch is absent
except ImportError as e:
    raise ImportError("luabridge.torch needs PyTorch: pip install torch") from e

from .module import LuaModule
from .convert import ConversionError, convert
from .export import ExportError, export
from .function import function
from .load import load_lua
from . import convert_criterions, convert_graph, convert_layers, convert_tables  # noqa: F401  (register their converters)

__all__ = ["ConversionError", "ExportError", "LuaModule", "convert", "export", "function", "load_lua"]
