"""The fusion IR: a fused group of elementwise graph nodes as data, the vocabulary of its
expressions and a reference evaluator over numpy (or CuPy) arrays.

An expression is a nested tuple: ("in", k) is the k-th input of the group, ("const", x) a
number, (fn, *args) an fn of FNS applied to sub-expressions. Every value has the group's dtype
(only float32 and float64 groups are made): constants are cast to it, comparisons give 1 or 0
in it. An input whose index is in `scalar_inputs` has shape (1,) and is the same number at every
element. Backends may keep intermediates in a wider float type (LuaJIT computes in double);
`evaluate` rounds after every fn, as the unfused ops do.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Union

import numpy as np

Expr = tuple

# fn -> (arity, meaning). a, b, c are the operands; "true" is any value other than 0.
FNS: dict[str, tuple[int, str]] = {
    "add": (2, "a + b"),
    "sub": (2, "a - b"),
    "mul": (2, "a * b"),
    "div": (2, "a / b (IEEE: x/0 is +-inf, 0/0 NaN)"),
    "neg": (1, "-a"),
    "abs": (1, "|a|"),
    "exp": (1, "e^a"),
    "log": (1, "natural log of a (log 0 = -inf, negative: NaN)"),
    "sqrt": (1, "square root of a (negative: NaN)"),
    "rsqrt": (1, "1 / sqrt(a)"),
    "tanh": (1, "tanh(a)"),
    "sigmoid": (1, "1 / (1 + e^-a)"),
    "relu": (1, "0 where a < 0, else a (NaN stays NaN)"),
    "max": (2, "the larger of a and b; NaN if either is NaN (numpy.maximum)"),
    "min": (2, "the smaller of a and b; NaN if either is NaN (numpy.minimum)"),
    "pow": (2, "a ^ b (float power: a negative a to a non-integer b is NaN)"),
    "square": (1, "a * a"),
    "lt": (2, "1 if a < b else 0"),
    "le": (2, "1 if a <= b else 0"),
    "gt": (2, "1 if a > b else 0"),
    "ge": (2, "1 if a >= b else 0"),
    "eq": (2, "1 if a == b else 0 (NaN == NaN is 0)"),
    "ne": (2, "1 if a != b else 0"),
    "where": (3, "b where a is true (not 0), else c"),
    "clamp": (3, "b where a < b, c where a > c, else a (NaN stays NaN)"),
}

# fns whose CPU cost is a libm call (scalar in LuaJIT) rather than a few instructions
TRANSCENDENTAL = frozenset({"exp", "log", "tanh", "sigmoid", "pow"})


@dataclass(frozen=True)
class FusedGroup:
    """One fused node: outputs[j] = exprs[j] over the inputs (entry names, in argument order)."""
    inputs: tuple[str, ...]
    exprs: tuple[Expr, ...]
    dtype: str                       # numpy dtype name of every input, intermediate and output
    device: str                      # "cpu" or "cuda"
    nodes: tuple[str, ...]           # the fused nodes' names, in graph order
    scalar_inputs: frozenset = frozenset()   # indices of inputs of shape (1,), broadcast

    def fns(self) -> list[str]:
        """Every fn applied in the expressions (with repeats)."""
        return [fn for e in self.exprs for fn in expr_fns(e)]


def expr_fns(expr: Expr) -> list[str]:
    if expr[0] in ("in", "const"):
        return []
    return [expr[0]] + [fn for a in expr[1:] for fn in expr_fns(a)]


def as_lists(expr: Expr) -> list:
    """The expression as fresh nested lists (one per use, as Lua tables are made from them)."""
    return [as_lists(a) if isinstance(a, tuple) else a for a in expr]


def check(expr: Expr, num_inputs: int) -> None:
    """ValueError naming the part of expr outside the IR."""
    head = expr[0]
    if head == "in":
        if not (isinstance(expr[1], int) and 0 <= expr[1] < num_inputs):
            raise ValueError(f"fusion IR: input index {expr[1]!r} out of range for {num_inputs} inputs")
        return
    if head == "const":
        float(expr[1])
        return
    if head not in FNS:
        raise ValueError(f"fusion IR: unknown fn {head!r}")
    arity = FNS[head][0]
    if len(expr) - 1 != arity:
        raise ValueError(f"fusion IR: {head} takes {arity} operands, got {len(expr) - 1}")
    for a in expr[1:]:
        check(a, num_inputs)


def _apply(fn: str, args: list, xp: Any, dtype: Any) -> Any:
    a = args[0]
    b = args[1] if len(args) > 1 else None
    zero = xp.zeros((), dtype=dtype)
    with np.errstate(all="ignore"):
        if fn == "add":
            r = a + b
        elif fn == "sub":
            r = a - b
        elif fn == "mul":
            r = a * b
        elif fn == "div":
            r = a / b
        elif fn == "neg":
            r = -a
        elif fn == "abs":
            r = xp.abs(a)
        elif fn == "exp":
            r = xp.exp(a)
        elif fn == "log":
            r = xp.log(a)
        elif fn == "sqrt":
            r = xp.sqrt(a)
        elif fn == "rsqrt":
            r = 1 / xp.sqrt(a)
        elif fn == "tanh":
            r = xp.tanh(a)
        elif fn == "sigmoid":
            r = 1 / (1 + xp.exp(-a))
        elif fn == "relu":
            r = xp.where(a < zero, zero, a)
        elif fn == "max":
            r = xp.maximum(a, b)
        elif fn == "min":
            r = xp.minimum(a, b)
        elif fn == "pow":
            r = xp.power(a, b)
        elif fn == "square":
            r = a * a
        elif fn in ("lt", "le", "gt", "ge", "eq", "ne"):
            op = {"lt": xp.less, "le": xp.less_equal, "gt": xp.greater, "ge": xp.greater_equal,
                  "eq": xp.equal, "ne": xp.not_equal}[fn]
            r = op(a, b)
        elif fn == "where":
            r = xp.where(a != zero, b, args[2])
        elif fn == "clamp":
            lo, hi = b, args[2]
            r = xp.where(a < lo, lo, xp.where(a > hi, hi, a))
        else:
            raise ValueError(f"fusion IR: unknown fn {fn!r}")
    return xp.asarray(r).astype(dtype, copy=False)


def _eval(expr: Expr, arrays: list, xp: Any, dtype: Any, memo: dict) -> Any:
    got = memo.get(expr)
    if got is not None:
        return got
    head = expr[0]
    if head == "in":
        v = xp.asarray(arrays[expr[1]]).astype(dtype, copy=False)
    elif head == "const":
        v = xp.asarray(expr[1], dtype=dtype)
    else:
        v = _apply(head, [_eval(a, arrays, xp, dtype, memo) for a in expr[1:]], xp, dtype)
    memo[expr] = v
    return v


def evaluate(expr_or_group: Union[Expr, FusedGroup], arrays: list, xp: Any = np,
             dtype: Any = None) -> Any:
    """The value of an expression (or the list of a group's outputs) over the input arrays,
    computed in dtype (default: the group's, else the first array's), one fn at a time.
    Inputs of shape (1,) broadcast; results have the broadcast shape."""
    if isinstance(expr_or_group, FusedGroup):
        g = expr_or_group
        dt = np.dtype(dtype or g.dtype)
        memo: dict = {}
        shape = next((xp.asarray(a).shape for k, a in enumerate(arrays) if k not in g.scalar_inputs), (1,))
        return [xp.broadcast_to(_eval(e, arrays, xp, dt, memo), shape).copy() for e in g.exprs]
    dt = np.dtype(dtype or (xp.asarray(arrays[0]).dtype if arrays else np.float64))
    return _eval(expr_or_group, arrays, xp, dt, {})
