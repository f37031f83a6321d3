"""Reductions: reduce_sum and reduce_mean over `reduction_indices` (all axes when absent; the
reduced axes are dropped, (1,) when none is left; negative axes count from the end) and argmax
along `axis` (0-based indices as float32)."""
from __future__ import annotations

from ..registry import Op, parse_tuple
from ..symbol import Node
from ._util import kernel, make, no_gradient, register_all


def axes_of(attrs: dict, ndim: int, key: str = "reduction_indices") -> tuple:
    """The reduced axes, 0-based and sorted; every axis when the attribute is absent or empty."""
    given = parse_tuple(attrs.get(key)) or tuple(range(ndim))
    axes = []
    for a in given:
        if not -ndim <= a < ndim:
            raise ValueError(f"axis {a} is out of range for {ndim} dims")
        axes.append(a % ndim)
    if len(set(axes)) != len(axes):
        raise ValueError(f"axis repeated in {list(given)}")
    return tuple(sorted(axes))


def reduced_shape(shape: tuple, axes: tuple) -> tuple:
    return tuple(d for i, d in enumerate(shape) if i not in axes) or (1,)


def _reduce_shape(attrs: dict, ins: list, outs: list = (None,)) -> tuple:
    if ins[0] is None:
        return ins, [None]
    return ins, [reduced_shape(ins[0], axes_of(attrs, len(ins[0])))]


def _lua_axes() -> str:
    """Lua: the 0-based axes of the attribute for x[1] (nil: all)."""
    return "K.axes(kwarg.reduction_indices, x[1]:dim())"


def _reduce_grad(kind: str):
    def grad(node: Node, og: list) -> list:
        return [make(f"_reduce_{kind}_backward", [og[0]], name=f"{node.name}_backward",
                     forward=node, **node.attrs)]
    return grad


def _broadcast_grad(kind: str):
    """The gradient of the broadcast back (a linear map): the reduction over the same axes."""
    def grad(node: Node, og: list) -> list:
        return [make(f"reduce_{kind}", [og[0]], name=f"{node.name}_grad", **node.attrs)]
    return grad


for _kind in ("sum", "mean"):
    register_all(Op(f"reduce_{_kind}", infer_shape=_reduce_shape, gradient=_reduce_grad(_kind),
                    compute=kernel(f"K.reduce('{_kind}', y[1], x[1], {_lua_axes()})")))
    # output: the forward input's shape (is_backward); the axes are those of the forward node
    register_all(Op(f"_reduce_{_kind}_backward", is_backward=True, gradient=_broadcast_grad(_kind),
                    compute=kernel(f"K.reduceBackward('{_kind}', y[1], x[1], "
                                   "K.axes(kwarg.reduction_indices, y[1]:dim()))")))


def _argmax_shape(attrs: dict, ins: list, outs: list = (None,)) -> tuple:
    if ins[0] is None:
        return ins, [None]
    return ins, [reduced_shape(ins[0], axes_of({"axis": attrs.get("axis", "0")}, len(ins[0]), "axis"))]


register_all(Op("argmax", infer_shape=_argmax_shape, gradient=no_gradient,
                compute=kernel("K.argmax(y[1], x[1], K.axes(kwarg.axis or '0', x[1]:dim())[1])")))
