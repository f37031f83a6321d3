"""Symbolic graphs of Lua compute closures, Lua nn modules and Python functions, with gradients,
memory planning and a session that runs them (luabridge's take on tinyflow/nnvm)."""
from . import registry
from .registry import LuaCompute, NNCompute, Op, PythonCompute, get, register
from .symbol import Entry, Group, Node, Symbol, Variable, create
from . import internal, ops  # noqa: F401  (the op library registers its ops at start-up)
from .compile import StageError, compile  # the function shadows its module's name here

__all__ = [
    "Entry", "Group", "LuaCompute", "NNCompute", "Node", "Op", "PythonCompute", "Session",
    "StageError", "Symbol", "Variable", "compile", "create", "get", "gradients", "infer_shapes", "lua_module", "python_op", "register",
    "registry",
]


def __getattr__(name: str):
    """The heavier parts (session, api, gradients) load on first use."""
    if name == "Session":
        from .session import Session
        return Session
    if name in ("lua_module", "python_op"):
        from . import api
        return getattr(api, name)
    if name == "infer_shapes":
        from .passes.infer import infer_symbol_shapes
        return infer_symbol_shapes
    if name == "gradients":
        from .passes.gradient import gradients
        return gradients
    raise AttributeError(f"module 'luabridge.graph' has no attribute {name!r}")
