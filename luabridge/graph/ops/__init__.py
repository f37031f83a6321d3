"""The op library (tinyflow's ops and more), registered by family on import.

Elementwise ops, reductions and matrix products compute with specialised Lua closures
(lua/luabridge/graph/ops.lua); nn ops are Lua nn modules run by the executor's closures."""
from . import elemwise, init, matrix, nn, reduce, state  # noqa: F401
