"""Feeds and state: placeholder (the session copies the feed into its output; attributes dtype
and, optionally, shape) and assign (writes its second input into the variable that is its
first and outputs the value)."""
from __future__ import annotations

from ..registry import Op, parse_tuple
from ._util import kernel, no_gradient, register_all, same_shape
from .init import dtype_name


def _placeholder_shape(attrs: dict, ins: list, outs: list = (None,)) -> tuple:
    shape = parse_tuple(attrs.get("shape"))
    return ins, [shape if shape else (outs[0] if outs else None)]


def _placeholder_type(attrs: dict, ins: list, outs: list = (None,)) -> tuple:
    return ins, [dtype_name(attrs)]


register_all(Op("placeholder", num_inputs=0, input_names=(), infer_shape=_placeholder_shape,
                infer_type=_placeholder_type, gradient=no_gradient))  # the executor copies the feed in

# the value is written into the variable, and into the output unless they share storage
register_all(Op("assign", num_inputs=2, input_names=("lhs", "rhs"), infer_shape=same_shape,
                mutate_inputs=[0], inplace=[(1, 0)], gradient=no_gradient,
                compute=kernel("(function(into, out) return function() into(); out() end end)"
                               "(K.ewise('copy', x[1], {x[2]}), K.ewise('copy', y[1], {x[2]}))")))
