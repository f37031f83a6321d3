"""Ops the graph machinery itself makes: group (_nop), nn backward, gradient sums and seeds."""
from __future__ import annotations

from .registry import LuaCompute, Op, parse_bool, parse_int, register


def _same_shape(attrs: dict, ins: list, outs: list = None) -> tuple:
    """Every input and output has one shape (the first one known)."""
    known = next((s for s in list(ins) + list(outs or []) if s is not None), None)
    for s in ins:
        if s is not None and known is not None and s != known:
            raise ValueError(f"inconsistent shapes {s} and {known}")
    return [known] * len(ins), [known] * max(1, len(outs or [None]))


def _first_shape(attrs: dict, ins: list, outs: list = None) -> tuple:
    return list(ins), [ins[0] if ins[0] is not None else (outs or [None])[0]]


register(Op("_nop", num_inputs=0, num_outputs=1, input_names=(),
            infer_shape=lambda attrs, ins: (ins, [(0,)]), hint="group"))  # no compute: no step

register(Op("_zeros_like", infer_shape=_first_shape,
            compute=LuaCompute("function(x, y) local out = y[1] return function() out:zero() end end")))

register(Op("_ones_like", infer_shape=_first_shape,
            compute=LuaCompute("function(x, y) local out = y[1] return function() out:fill(1) end end")))

register(Op(
    "_grad_sum", num_inputs=lambda attrs: parse_int(attrs.get("num_args"), 2),
    input_names=lambda attrs: [f"arg{i}" for i in range(parse_int(attrs.get("num_args"), 2))],
    infer_shape=_same_shape, inplace=[(0, 0)],
    compute=LuaCompute("""function(x, y)
  local out, n = y[1], #x
  return function()
    if not out:isSetTo(x[1]) then out:copy(x[1]) end
    for i = 2, n do out:add(x[i]) end
  end
end""")))


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
register(Op("_backward", num_inputs=_backward_num_inputs, num_outputs=_backward_num_outputs,
            input_names=lambda attrs: [f"arg{i}" for i in range(_backward_num_inputs(attrs))],
            is_backward=True))
