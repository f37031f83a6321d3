"""Which array module the GPU tests run with: CuPy when it is importable and sees a device,
else numpy standing in for it (LUABRIDGE_GPU_TESTS=cupy: a missing CuPy or device is an error)."""
from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

from helpers import cupy_device


def _array_module() -> tuple[Any, str]:
    """(CuPy or numpy, the mode in words)."""
    cupy, described = cupy_device()
    if cupy is not None:
        return cupy, described
    if os.environ.get("LUABRIDGE_GPU_TESTS") == "cupy":
        raise pytest.UsageError(f"LUABRIDGE_GPU_TESTS=cupy but no CuPy device ({described})")
    return np, f"numpy standing in for CuPy ({described})"


XP, MODE = _array_module()
ON_DEVICE = XP is not np
NEEDS_DEVICE = pytest.mark.skipif(not ON_DEVICE, reason=f"needs a CUDA device; running with {MODE}")

