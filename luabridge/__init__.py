"""luabridge: legacy Lua Torch7 code from modern Python, on an embedded LuaJIT."""
from .errors import LuaError
from .interop import from_dlpack, from_numpy, to_numpy
from .proxy import LuaObject, Tensor, unwrap, wrap
from .runtime import add_lua_path, dofile, eval, execute, lua_dir, require, runtime

__all__ = [
    "LuaError",
    "LuaObject",
    "Tensor",
    "add_lua_path",
    "dofile",
    "eval",
    "execute",
    "from_dlpack",
    "from_numpy",
    "lua_dir",
    "require",
    "runtime",
    "to_numpy",
    "unwrap",
    "wrap",
]
__version__ = "0.1.0"
