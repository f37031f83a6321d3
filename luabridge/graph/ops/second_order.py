"""Second derivatives of the nn ops that have one (softmax, relu, tanh, linear): each rule takes
the op's `_backward` node (inputs [grad output, forward inputs..., forward output], outputs the
forward inputs' gradients) and the gradients of those outputs, and returns the gradients of the
backward node's inputs as graph expressions, which the gradient pass can differentiate again."""
from __future__ import annotations

from typing import Optional

from ..registry import Op
from ..symbol import Entry, Node
from ._util import kernel, make, register_all, same_shape


def _class_sum_grad(node: Node, og: list) -> list:
    # summing along the class dim and broadcasting back is a symmetric linear map
    return [make("_class_sum", [og[0]], name=f"{node.name}_grad")]


# x summed along nn.SoftMax's class dim, broadcast back to x's shape
register_all(Op("_class_sum", infer_shape=same_shape, gradient=_class_sum_grad,
                compute=kernel("K.classSum(y[1], x[1])")))


def _mul(a: Entry, b: Entry, name: str) -> Entry:
    return make("__mul_symbol__", [a, b], name=name)


def tanh_second(node: Node, og: list) -> list:
    # gx = gy (1 - y^2): d/dgy = ggx (1 - y^2), d/dy = -2 ggx gy y
    gy, _, y = node.inputs
    g, n = og[0], node.name
    slope = make("__rsub_scalar__", [_mul(y, y, f"{n}_y2")], name=f"{n}_slope", scalar=1.0)
    d_y = make("__mul_scalar__", [_mul(_mul(g, gy, f"{n}_ggy"), y, f"{n}_ggyy")], name=f"{n}_grad_y",
               scalar=-2.0)
    return [_mul(g, slope, f"{n}_grad_gy"), None, d_y]


def relu_second(node: Node, og: list) -> list:
    # gx = gy [y > 0]: linear in gy, zero second derivative elsewhere
    _, _, y = node.inputs
    n = node.name
    at_zero = make("equal", [y, make("zeros_like", [y], name=f"{n}_zeros")], name=f"{n}_at_zero")
    mask = make("__rsub_scalar__", [at_zero], name=f"{n}_mask", scalar=1.0)
    return [_mul(og[0], mask, f"{n}_grad_gy"), None, None]


def softmax_second(node: Node, og: list) -> list:
    # gx = y (gy - S(gy y)) with S the class sum broadcast back; with t = S(ggx y):
    # d/dgy = y (ggx - t), d/dy = ggx (gy - S(gy y)) - gy t
    gy, _, y = node.inputs
    g, n = og[0], node.name
    t = make("_class_sum", [_mul(g, y, f"{n}_gy_")], name=f"{n}_t")
    s = make("_class_sum", [_mul(gy, y, f"{n}_yy")], name=f"{n}_s")
    d_gy = _mul(y, make("__sub_symbol__", [g, t], name=f"{n}_gt"), f"{n}_grad_gy")
    centred = _mul(g, make("__sub_symbol__", [gy, s], name=f"{n}_gs"), f"{n}_gc")
    d_y = make("__sub_symbol__", [centred, _mul(gy, t, f"{n}_gyt")], name=f"{n}_grad_y")
    return [d_gy, None, d_y]


def linear_second(node: Node, og: list) -> list:
    # gx = gy W, gW = gy^T x, gb = column sums of gy:
    # d/dgy = ggx W^T + x ggW^T + ggb, d/dx = gy ggW, d/dW = gy^T ggx
    gy, x, w = node.inputs[:3]
    has_bias = len(node.forward.inputs) == 3
    ggx, ggw = og[0], og[1]
    n = node.name
    bias: list[Optional[Entry]] = [og[2]] if has_bias else []
    through_w = make("matmul", [ggx, w], name=f"{n}_ggx_w", transpose_b=True)
    through_x = make("linear", [x, ggw, *bias], name=f"{n}_x_ggw", no_bias=not has_bias)
    d_gy = make("__add_symbol__", [through_w, through_x], name=f"{n}_grad_gy")
    d_x = make("matmul", [gy, ggw], name=f"{n}_grad_x")
    d_w = make("matmul", [gy, ggx], name=f"{n}_grad_w", transpose_a=True)
    return [d_gy, d_x, d_w] + [None] * len(bias) + [None]
