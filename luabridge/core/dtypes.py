"""The element types, from the table every layer reads: lua/torch/elementtypes.lua, parsed here
without running Lua (the Lua side reads it through lua/torch/core/dtype.lua)."""
from __future__ import annotations

import numpy as np

from .lua_table import parse
from .paths import lua_dir

ROWS: list[dict] = parse((lua_dir() / "torch" / "elementtypes.lua").read_text())

# torch7 element type name ('Float') -> numpy dtype, and back
DTYPES: dict[str, np.dtype] = {row["name"]: np.dtype(row["numpy"]) for row in ROWS}
TYPE_OF_DTYPE: dict[np.dtype, str] = {v: k for k, v in DTYPES.items()}
# torch7 element type name -> cutorch's name of the device type ('Float' -> 'Cuda')
CUDA_NAMES: dict[str, str] = {row["name"]: row["cuda"] for row in ROWS}
