"""Helpers shared by the op families: Lua sources, shape rules, gradient node makers."""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Optional, Sequence

from ..registry import LuaCompute, Op, register
from ..symbol import Entry, Node, Symbol, create

Shape = Optional[tuple]


def kernel(expr: str) -> LuaCompute:
    """A compute factory returning `expr`, a closure made by lua/luabridge/graph/ops.lua (K)."""
    return LuaCompute(f"function(x, y, kwarg) local K = require 'luabridge.graph.ops'; return {expr} end")


def register_all(op: Op, *aliases: str) -> Op:
    """Registers op under its name and each alias."""
    register(op)
    for alias in aliases:
        register(replace(op, name=alias))
    return op


# ---- gradient graph makers ----

def make(op_name: str, inputs: Sequence[Entry], name: Optional[str] = None,
         forward: Optional[Node] = None, **attrs: Any) -> Entry:
    """Output 0 of a new op node over the entries; `forward` marks a backward op's forward node."""
    sym = create(op_name, *(Symbol([e]) for e in inputs), name=name, **attrs)
    if forward is not None:
        sym.outputs[0].node.forward = forward
    return sym.outputs[0]


def output(node: Node, i: int = 0) -> Entry:
    return Entry(node, i, 0)


def no_gradient(node: Node, out_grads: list) -> list:
    """Gradient rule of ops that have none (comparisons, indices, constants)."""
    return [None] * len(node.inputs)


# ---- shape rules ----

def broadcast_shape(attrs: dict, ins: list, outs: Sequence[Shape] = (None,)) -> tuple:
    """Elementwise shapes: every operand has the output's shape, except operands of shape (1,),
    which broadcast (tinyflow's scalars). Decides only once every input is known or the output
    is, so an early (1,) input does not fix the output."""
    out = outs[0] if outs else None
    if out is None:
        if any(s is None for s in ins):
            full = [s for s in ins if s is not None and s != (1,)]
            if not full:
                return ins, [None]
            out = full[0]
        else:
            out = next((s for s in ins if s != (1,)), (1,))
    new_ins = []
    for i, s in enumerate(ins):
        if s is None:
            s = out
        elif s != out and s != (1,):
            raise ValueError(f"operand {i} has shape {fmt_shape(s)}, the others {fmt_shape(out)} "
                             "(only shape (1,) broadcasts)")
        new_ins.append(s)
    return new_ins, [out]


def same_shape(attrs: dict, ins: list, outs: Sequence[Shape] = (None,)) -> tuple:
    """Every input and the output have one shape."""
    known = next((s for s in [*outs, *ins] if s is not None), None)
    for i, s in enumerate(ins):
        if s is not None and known is not None and s != known:
            raise ValueError(f"operand {i} has shape {fmt_shape(s)}, expected {fmt_shape(known)}")
    return [known] * len(ins), [known] * max(1, len(outs))


def fmt_shape(s: Shape) -> str:
    """(2, 3) as '(2, 3)', (5,) as '(5,)'."""
    return "(" + ", ".join(map(str, s)) + ("," if len(s) == 1 else "") + ")"

