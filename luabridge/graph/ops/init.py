"""Constant and random tensors: zeros, ones, normal (attribute shape, e.g. "[784,10]"; normal's
stdev and mean), zeros_like and ones_like. They have no gradient."""
from __future__ import annotations

from ..registry import Op, parse_tuple
from ._util import kernel, no_gradient, register_all, same_shape

DTYPE_CODES = {"0": "float32", "1": "float64", "2": "float16", "3": "uint8", "4": "int32"}


def dtype_name(attrs: dict) -> str:
    """The "dtype" attribute as a numpy name (nnvm's codes accepted); float32 by default."""
    code = attrs.get("dtype", "float32")
    return DTYPE_CODES.get(code, code)


def _shape_attr(attrs: dict, ins: list, outs: list = (None,)) -> tuple:
    shape = parse_tuple(attrs.get("shape"))
    if shape:
        if min(shape) < 0:
            raise ValueError(f"negative size in shape {list(shape)}")
        return ins, [shape]
    return ins, [outs[0] if outs else None]   # from the consumer (assign to a known variable)


def _dtype_attr(attrs: dict, ins: list, outs: list = (None,)) -> tuple:
    return ins, [dtype_name(attrs)]


def _source(op: str, expr: str) -> None:
    register_all(Op(op, num_inputs=0, input_names=(), infer_shape=_shape_attr, infer_type=_dtype_attr,
                    gradient=no_gradient, compute=kernel(expr)))


_source("zeros", "K.ewise('fill', y[1], {}, 0)")
_source("ones", "K.ewise('fill', y[1], {}, 1)")
_source("normal", "K.normal(y[1], tonumber(kwarg.mean or 0), tonumber(kwarg.stdev or 1))")

for _op, _value in (("zeros_like", 0), ("ones_like", 1)):
    register_all(Op(_op, infer_shape=same_shape, gradient=no_gradient,
                    compute=kernel(f"K.ewise('fill', y[1], {{}}, {_value})")))
