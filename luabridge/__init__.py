"""luabridge: legacy Lua Torch7 code from modern Python, on an embedded LuaJIT."""
from .core.errors import LuaError
from . import providers  # noqa: F401  (registers the functions Lua calls back: the runtime's start-up)
from .core.interop import from_dlpack, from_numpy
from .model import Model
from .t7.load import load, save
from .core.proxy import LuaObject, Tensor, to_numpy, unwrap, wrap
from .core.runtime import (LUA52COMPAT, Lua52CompatWarning, add_lua_path, dofile, eval, execute, lua_dir, require,
                           runtime, stop_workers)
from .core.version import __version__

__all__ = [
    "LUA52COMPAT",
    "Lua52CompatWarning",
    "LuaError",
    "LuaObject",
    "Model",
    "Tensor",
    "add_lua_path",
    "dofile",
    "eval",
    "execute",
    "from_dlpack",
    "from_numpy",
    "load",
    "lua_dir",
    "require",
    "runtime",
    "save",
    "stop_workers",
    "to_numpy",
    "unwrap",
    "wrap",
    "nn",
    "optim",
    "t7",
]


def load_ipython_extension(ipython) -> None:  # noqa: ANN001 - IPython's shell
    """`%load_ext luabridge`: the %lua and %%lua magics (luabridge/jupyter/magics.py)."""
    from .jupyter import load_ipython_extension as load

    load(ipython)


def __getattr__(name: str):
    """luabridge.nn, luabridge.optim and luabridge.t7, imported on first use."""
    if name in ("nn", "optim", "t7"):
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'luabridge' has no attribute {name!r}")
