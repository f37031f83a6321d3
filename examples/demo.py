"""A short tour: Lua Torch7 tensor code run from Python, sharing memory with numpy."""
import numpy as np

import luabridge

torch = luabridge.require("torch")

# Lua code runs unchanged: tensors keep torch7 semantics (1-based, views share storage)
luabridge.execute("""
  x = torch.Tensor(2, 3):fill(1)
  local col = x:select(2, 2)
  col:fill(5)
  print(x)
""")

# numpy arrays are shared zero-copy with Lua tensors, in both directions
a = np.arange(12, dtype=np.float32).reshape(3, 4)
t = luabridge.wrap(luabridge.from_numpy(a))
t.narrow(2, 1, 2).fill(-1)       # writes through to a
print(a)
print(np.asarray(t.t()))         # a transposed view, still the same memory
