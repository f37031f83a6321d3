"""Matrix product: matmul (2-D, with TensorFlow's transpose_a / transpose_b) and its backward
op computing both input gradients."""
from __future__ import annotations

from ..registry import Op, parse_bool
from ..symbol import Node, Symbol, create
from ._util import fmt_shape, kernel, no_gradient, register_all


def _matmul_shape(attrs: dict, ins: list, outs: list = (None,)) -> tuple:
    a, b = ins
    if a is None or b is None:
        return ins, [None]
    if len(a) != 2 or len(b) != 2:
        raise ValueError(f"matmul takes 2-D operands, got {fmt_shape(a)} and {fmt_shape(b)}")
    ta, tb = parse_bool(attrs.get("transpose_a")), parse_bool(attrs.get("transpose_b"))
    (m, k), (k2, n) = a[::-1] if ta else a, b[::-1] if tb else b
    if k != k2:
        raise ValueError(f"matmul: inner sizes differ: {fmt_shape(a)} x {fmt_shape(b)}"
                         f"{' (transposes as given)' if ta or tb else ''}")
    return ins, [(m, n)]


def _matmul_grad(node: Node, og: list) -> list:
    back = create("_matmul_backward", *(Symbol([e]) for e in [og[0], *node.inputs]),
                  name=f"{node.name}_backward", **node.attrs)
    back.outputs[0].node.forward = node
    return [back.outputs[0], back.outputs[1]]


register_all(Op("matmul", num_inputs=2, input_names=("lhs", "rhs"), infer_shape=_matmul_shape,
                gradient=_matmul_grad,
                compute=kernel("K.matmul(y[1], x[1], x[2], K.flag(kwarg.transpose_a), "
                               "K.flag(kwarg.transpose_b))")))

# (grad c, a, b) -> (grad a, grad b) for c = op(a) op(b); shapes are those of a and b
register_all(Op("_matmul_backward", num_inputs=3, num_outputs=2, input_names=("grad", "lhs", "rhs"),
                is_backward=True, gradient=no_gradient,
                compute=kernel("K.matmulBackward(y[1], y[2], x[1], x[2], x[3], "
                               "K.flag(kwarg.transpose_a), K.flag(kwarg.transpose_b))")))
