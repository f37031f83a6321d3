"""Elementwise ops: the operators of symbols (+ - * / ** with symbols or scalars on either side),
exp, log, sqrt, equal and the variadic sum. Operands of shape (1,) broadcast; their gradients
are summed back down to (1,) by `_sum_to_like`."""
from __future__ import annotations

import math
from typing import Callable, Optional

from ..registry import Op, parse_float, parse_int
from ..symbol import Entry, Node
from ._util import broadcast_shape, kernel, make, no_gradient, output, register_all, same_shape

Grad = Callable[[Node, list], list]


def _like(g: Entry, ref: Entry, node: Node, i: int) -> Entry:
    """g summed to ref's shape (a copy unless a binary op broadcast ref)."""
    return make("_sum_to_like", [g, ref], name=f"{node.name}_grad_{i}")


def _scaled(g: Entry, s: float, name: str) -> Entry:
    return make("__mul_scalar__", [g], name=name, scalar=s)


def _neg(g: Entry, name: str) -> Entry:
    return _scaled(g, -1.0, name)


def _scalar(node: Node) -> float:
    return parse_float(node.attrs.get("scalar"))


# ---- gradients: (node, [output grad]) -> input grads ----

def _grad_add(node: Node, og: list) -> list:
    a, b = node.inputs
    return [_like(og[0], a, node, 0), _like(og[0], b, node, 1)]


def _grad_sub(node: Node, og: list) -> list:
    a, b = node.inputs
    return [_like(og[0], a, node, 0), _like(_neg(og[0], f"{node.name}_neg"), b, node, 1)]


def _grad_mul(node: Node, og: list) -> list:
    a, b = node.inputs
    ga = make("__mul_symbol__", [og[0], b], name=f"{node.name}_grad_mul0")
    gb = make("__mul_symbol__", [og[0], a], name=f"{node.name}_grad_mul1")
    return [_like(ga, a, node, 0), _like(gb, b, node, 1)]


def _grad_div(node: Node, og: list) -> list:
    # with t = g / b and y = a / b: grad a = t, grad b = -t * y
    a, b = node.inputs
    t = make("__div_symbol__", [og[0], b], name=f"{node.name}_grad_div")
    ty = make("__mul_symbol__", [t, output(node)], name=f"{node.name}_grad_mul")
    return [_like(t, a, node, 0), _like(_neg(ty, f"{node.name}_grad_neg"), b, node, 1)]


def _grad_pow(node: Node, og: list) -> list:
    # d(a^b) = b a^(b-1) da + a^b ln(a) db
    a, b = node.inputs
    n = node.name
    bm1 = make("__add_scalar__", [b], name=f"{n}_grad_bm1", scalar=-1.0)
    da = make("__mul_symbol__", [make("__pow_symbol__", [a, bm1], name=f"{n}_grad_pow"), b], name=f"{n}_grad_da")
    db = make("__mul_symbol__", [output(node), make("log", [a], name=f"{n}_grad_log")], name=f"{n}_grad_db")
    ga = make("__mul_symbol__", [og[0], da], name=f"{n}_grad_mul0")
    gb = make("__mul_symbol__", [og[0], db], name=f"{n}_grad_mul1")
    return [_like(ga, a, node, 0), _like(gb, b, node, 1)]


def _grad_identity(node: Node, og: list) -> list:
    return [og[0]]


def _grad_rsub(node: Node, og: list) -> list:
    return [_neg(og[0], f"{node.name}_grad_0")]


def _grad_mul_scalar(node: Node, og: list) -> list:
    return [_scaled(og[0], _scalar(node), f"{node.name}_grad_0")]


def _grad_div_scalar(node: Node, og: list) -> list:
    return [make("__div_scalar__", [og[0]], name=f"{node.name}_grad_0", scalar=_scalar(node))]


def _grad_rdiv_scalar(node: Node, og: list) -> list:
    # d(s/x) = -(s/x)/x dx
    x, n = node.inputs[0], node.name
    yx = make("__div_symbol__", [output(node), x], name=f"{n}_grad_div")
    return [_neg(make("__mul_symbol__", [og[0], yx], name=f"{n}_grad_mul"), f"{n}_grad_0")]


def _grad_pow_scalar(node: Node, og: list) -> list:
    # d(x^s) = s x^(s-1) dx
    s, x, n = _scalar(node), node.inputs[0], node.name
    if s == 0:
        return [None]
    if s == 1:
        return [og[0]]
    base = x if s == 2 else make("__pow_scalar__", [x], name=f"{n}_grad_pow", scalar=s - 1)
    d = _scaled(base, s, f"{n}_grad_scale")
    return [make("__mul_symbol__", [og[0], d], name=f"{n}_grad_0")]


def _grad_rpow_scalar(node: Node, og: list) -> list:
    # d(s^x) = s^x ln(s) dx
    n = node.name
    d = _scaled(output(node), math.log(_scalar(node)), f"{n}_grad_scale")
    return [make("__mul_symbol__", [og[0], d], name=f"{n}_grad_0")]


def _grad_exp(node: Node, og: list) -> list:
    return [make("__mul_symbol__", [og[0], output(node)], name=f"{node.name}_grad_0")]


def _grad_log(node: Node, og: list) -> list:
    return [make("__div_symbol__", [og[0], node.inputs[0]], name=f"{node.name}_grad_0")]


def _grad_sqrt(node: Node, og: list) -> list:
    twice = _scaled(output(node), 2.0, f"{node.name}_grad_twice")
    return [make("__div_symbol__", [og[0], twice], name=f"{node.name}_grad_0")]


def _grad_ewise_sum(node: Node, og: list) -> list:
    return [og[0]] * len(node.inputs)


# ---- the ops ----

def _binary(name: str, k: str, grad: Grad, *aliases: str) -> None:
    # the output may take either operand's buffer (the kernels read element i before writing it)
    register_all(Op(name, num_inputs=2, input_names=("lhs", "rhs"), infer_shape=broadcast_shape,
                    gradient=grad, inplace=[(0, 0), (1, 0)],
                    compute=kernel(f"K.ewise('{k}', y[1], x)")), *aliases)


def _with_scalar(name: str, k: str, grad: Grad, choose: Optional[str] = None) -> None:
    """An op of one symbol and the number in attribute "scalar"; choose: Lua picking the
    kernel name from s (the scalar)."""
    pick = choose or f"'{k}'"
    register_all(Op(name, input_names=("data",), infer_shape=same_shape, gradient=grad,
                    inplace=[(0, 0)],
                    compute=kernel(f"(function(s) return K.ewise({pick}, y[1], x, s) end)"
                                   "(tonumber(kwarg.scalar))")))


def _unary(name: str, k: str, grad: Grad) -> None:
    register_all(Op(name, input_names=("data",), infer_shape=same_shape, gradient=grad,
                    inplace=[(0, 0)], compute=kernel(f"K.ewise('{k}', y[1], x)")))


_binary("__add_symbol__", "add", _grad_add, "add", "elemwise_add")
_binary("__sub_symbol__", "sub", _grad_sub, "sub", "elemwise_sub")
_binary("__mul_symbol__", "mul", _grad_mul, "mul", "elemwise_mul")
_binary("__div_symbol__", "div", _grad_div, "div", "elemwise_div")
_binary("__pow_symbol__", "pow", _grad_pow, "pow")
_binary("equal", "equal", no_gradient)

_with_scalar("__add_scalar__", "add_scalar", _grad_identity)
_with_scalar("__sub_scalar__", "sub_scalar", _grad_identity)
_with_scalar("__rsub_scalar__", "rsub_scalar", _grad_rsub)
_with_scalar("__mul_scalar__", "mul_scalar", _grad_mul_scalar)
_with_scalar("__div_scalar__", "div_scalar", _grad_div_scalar)
_with_scalar("__rdiv_scalar__", "rdiv_scalar", _grad_rdiv_scalar)
_with_scalar("__pow_scalar__", "pow_scalar", _grad_pow_scalar, choose="s == 2 and 'square' or 'pow_scalar'")
_with_scalar("__rpow_scalar__", "rpow_scalar", _grad_rpow_scalar)

_unary("exp", "exp", _grad_exp)
_unary("log", "log", _grad_log)
_unary("sqrt", "sqrt", _grad_sqrt)


def _sum_args(attrs: dict) -> int:
    return parse_int(attrs.get("num_args"), 2)


register_all(Op("__ewise_sum__", num_inputs=_sum_args,
                input_names=lambda attrs: [f"arg{i}" for i in range(_sum_args(attrs))],
                infer_shape=same_shape, gradient=_grad_ewise_sum, inplace=[(0, 0)],
                compute=kernel("K.sum(y[1], x)")), "add_n")


def _sum_to_like_shape(attrs: dict, ins: list, outs: list = (None,)) -> tuple:
    """(grad, ref) -> ref's shape; grad has it too, or ref is (1,)."""
    g, ref = ins
    out = ref if ref is not None else outs[0]
    if g is not None and out is not None and g != out and out != (1,):
        raise ValueError(f"a gradient of shape {g} cannot sum to shape {out}")
    return [g, out], [out]


def _grad_sum_to_like(node: Node, og: list) -> list:
    # the sum's adjoint: og broadcast back to the gradient's shape
    g = node.inputs[0]
    ones = make("ones_like", [g], name=f"{node.name}_grad_ones")
    return [make("__mul_symbol__", [ones, og[0]], name=f"{node.name}_grad_0"), None]


# grad summed down to ref's shape: the gradient of an operand that a binary op broadcast
register_all(Op("_sum_to_like", num_inputs=2, input_names=("grad", "ref"),
                infer_shape=_sum_to_like_shape, gradient=_grad_sum_to_like, inplace=[(0, 0)],
                compute=kernel("K.sumTo(y[1], x[1])")))
