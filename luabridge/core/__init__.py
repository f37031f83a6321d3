"""The bottom layer (DESIGN.md): errors, paths, version, dtypes (read from lua/torch/elementtypes.lua),
memory (numpy-owned buffers), runtime (one LuaJIT runtime per thread), interop (numpy / DLPack <->
Lua tensors) and proxy (Lua objects as Python objects). It imports nothing above it."""
