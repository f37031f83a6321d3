"""tf.nn: the op functions again, with tinyflow's conv2d and max_pool defaults (padding
'VALID', strides [1, 1, 1, 1], NCHW)."""
from __future__ import annotations

from typing import Any, Optional, Sequence

from ..graph.symbol import Symbol, create
from ._ops import *  # noqa: F401,F403
from ._ops import __all__ as _op_names

__all__ = [*_op_names]


def conv2d(data: Symbol, weight: Optional[Symbol] = None, strides: Sequence[int] = (1, 1, 1, 1),
           padding: str = "VALID", data_format: str = "NCHW", **kwargs: Any) -> Symbol:
    if weight is not None:
        kwargs["weight"] = weight
    return create("conv2d", data, strides=list(strides), padding=padding, data_format=data_format, **kwargs)


def max_pool(data: Symbol, strides: Sequence[int] = (1, 1, 1, 1), padding: str = "VALID",
             data_format: str = "NCHW", **kwargs: Any) -> Symbol:
    return create("max_pool", data, strides=list(strides), padding=padding, data_format=data_format, **kwargs)
