"""Ops the graph machinery itself makes: group (_nop) and nn backward. (Gradient seeds and sums
use the library's ones_like, zeros_like and __ewise_sum__.)"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .registry import Op, parse_bool, parse_int, register

if TYPE_CHECKING:
    from .symbol import Node


register(Op("_nop", num_inputs=0, num_outputs=1, input_names=(),
            infer_shape=lambda attrs, ins: (ins, [(0,)]), hint="group"))  # no compute: no step


def backward_layout(attrs: dict) -> tuple[int, bool, bool, int, int]:
    """The `_backward` attributes: (forward inputs, needs inputs, needs outputs, inputs with no
    gradient (criterion target), states (trailing inputs without gradient))."""
    return (parse_int(attrs["forward_inputs"]), parse_bool(attrs["need_inputs"]),
            parse_bool(attrs["need_outputs"]), parse_int(attrs.get("no_grad_inputs"), 0),
            parse_int(attrs.get("num_states"), 0))


def _backward_num_inputs(attrs: dict) -> int:
    n_fwd, need_in, need_out, _, _ = backward_layout(attrs)
    return 1 + (n_fwd if need_in else 0) + (1 if need_out else 0)


def _backward_num_outputs(attrs: dict) -> int:
    n_fwd, _, _, _, _ = backward_layout(attrs)
    return n_fwd


# One `_backward` node per nn node: inputs [output grad, forward inputs (if needed), forward
# output (if needed)], outputs the gradients of every forward input (those of the target and
# states are computed as zeros / left untouched); node.forward is the nn node.
def _backward_gradient(node: "Node", out_grads: list) -> list:
    """The second derivative of an nn op: its NNCompute's own rule, or an error naming it."""
    fwd = node.forward
    rule = getattr(fwd.op.compute, "backward_gradient", None)
    if rule is None:
        raise ValueError(f"gradients: nn op {fwd.op.name!r} (node {fwd.name!r}) has no second derivative")
    return rule(node, out_grads)


register(Op("_backward", num_inputs=_backward_num_inputs, num_outputs=_backward_num_outputs,
            input_names=lambda attrs: [f"arg{i}" for i in range(_backward_num_inputs(attrs))],
            is_backward=True, gradient=_backward_gradient))
