"""numpy float64 references of the fusion IR's vocabulary (luabridge/graph/fusion_ir.FNS), from
numpy's semantics: comparisons give 1.0 / 0.0, and max, min, relu and clamp propagate NaN as numpy
does. Read by tests/test_fuse.py (the CPU kernels) and tests/test_cuda_fuse.py (the CUDA source)."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np


def _as_float(compare: Callable[..., Any]) -> Callable[..., Any]:
    return lambda a, b: compare(a, b) * 1.0


FN_REFERENCE: dict[str, Callable[..., Any]] = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "neg": np.negative,
    "abs": np.abs, "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "rsqrt": lambda a: 1.0 / np.sqrt(a),
    "tanh": np.tanh, "sigmoid": lambda a: 1.0 / (1.0 + np.exp(-a)), "relu": lambda a: np.maximum(a, 0.0),
    "max": np.maximum, "min": np.minimum, "pow": np.power, "square": lambda a: a * a,
    "lt": _as_float(np.less), "le": _as_float(np.less_equal), "gt": _as_float(np.greater),
    "ge": _as_float(np.greater_equal), "eq": _as_float(np.equal), "ne": _as_float(np.not_equal),
    "where": lambda c, a, b: np.where(c != 0, a, b), "clamp": np.clip,
}
