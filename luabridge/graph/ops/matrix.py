"""Matrix product: matmul (2-D, with TensorFlow's transpose_a / transpose_b) and its backward
op computing both input gradients."""
from __future__ import annotations

from ..registry import Op, parse_bool
from ..symbol import Entry, Node, Symbol, create
from ._util import fmt_shape, kernel, register_all


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


def _matmul(a: Entry, b: Entry, name: str, attrs: dict) -> Symbol:
    return create("matmul", Symbol([a]), Symbol([b]), name=name, **attrs)


def _matmul_backward(gc: Entry, a: Entry, b: Entry, name: str, attrs: dict) -> list[Entry]:
    return create("_matmul_backward", Symbol([gc]), Symbol([a]), Symbol([b]), name=name, **attrs).outputs


def _matmul_grad(node: Node, og: list) -> list:
    back = _matmul_backward(og[0], *node.inputs, f"{node.name}_backward", node.attrs)
    back[0].node.forward = node
    return back


register_all(Op("matmul", num_inputs=2, input_names=("lhs", "rhs"), infer_shape=_matmul_shape,
                gradient=_matmul_grad,
                compute=kernel("K.matmul(y[1], x[1], x[2], K.flag(kwarg.transpose_a), "
                               "K.flag(kwarg.transpose_b))")))


def _matmul_backward_grad(node: Node, og: list) -> list:
    # c = f(a, b) is bilinear: the map gc -> (ga, gb) is the adjoint of (da, db) -> f(da, b) +
    # f(a, db), so its gradient in gc is f(gga, b) + f(a, ggb); ga does not depend on a and gb
    # is linear in a (<ggb, gb> = <gc, f(a, ggb)>), and likewise for b. ga reads only gc and
    # the rhs, gb only gc and the lhs: one backward of (gc, gga, ggb) gives d_a and d_b.
    gc, a, b = node.inputs
    gga, ggb = og
    n = node.name
    d_gc = create("__add_symbol__", _matmul(gga, b, f"{n}_grad_gc0", node.attrs),
                  _matmul(a, ggb, f"{n}_grad_gc1", node.attrs), name=f"{n}_grad_gc")
    d_a, d_b = _matmul_backward(gc, gga, ggb, f"{n}_grad_ab", node.attrs)
    return [d_gc, d_a, d_b]


def _matmul_backward_shape(attrs: dict, ins: list, outs: list = (None, None)) -> tuple:
    return ins, [ins[1], ins[2]]


# (grad c, a, b) -> (grad a, grad b) for c = op(a) op(b); shapes are those of a and b
register_all(Op("_matmul_backward", num_inputs=3, num_outputs=2, input_names=("grad", "lhs", "rhs"),
                is_backward=True, gradient=_matmul_backward_grad, infer_shape=_matmul_backward_shape,
                compute=kernel("K.matmulBackward(y[1], y[2], x[1], x[2], x[3], "
                               "K.flag(kwarg.transpose_a), K.flag(kwarg.transpose_b))")))
