"""Which array module the GPU tests run with: CuPy when it is importable and sees a device,
else numpy standing in for it (LUABRIDGE_GPU_TESTS=cupy: a missing CuPy or device is an error)."""
from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest


def _array_module() -> tuple[Any, str]:
    """(CuPy or numpy, the mode in words)."""
    try:
        import cupy
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:   # no CuPy, no driver, no device: each raises its own kind
        reason = f"{type(e).__name__}: {e}".splitlines()[0]
    else:
        if count > 0:
            name = cupy.cuda.runtime.getDeviceProperties(0)["name"]
            return cupy, f"CuPy {cupy.__version__} on {name.decode() if isinstance(name, bytes) else name}"
        reason = "CuPy sees no device"
    if os.environ.get("LUABRIDGE_GPU_TESTS") == "cupy":
        raise pytest.UsageError(f"LUABRIDGE_GPU_TESTS=cupy but no CuPy device ({reason})")
    return np, f"numpy standing in for CuPy ({reason})"


XP, MODE = _array_module()
ON_DEVICE = XP is not np
NEEDS_DEVICE = pytest.mark.skipif(not ON_DEVICE, reason=f"needs a CUDA device; running with {MODE}")

