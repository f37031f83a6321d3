"""Fused elementwise groups (luabridge/graph/fusion_ir.py) as CuPy ``ElementwiseKernel``s.

A group's expressions render to the C body of one elementwise kernel: every inner node becomes a
``const`` local of the group's C type (so a shared subexpression is computed once and an operand
used twice by a template is read, not recomputed), then each output is assigned its root.
float32 groups call CUDA's float functions (expf, tanhf, ...) on float literals (``1.5f``);
float64 groups the double ones. An input of shape (1,) (``FusedGroup.scalar_inputs``) is a
``raw`` parameter read as ``x{k}[0]``: the same value for every element, whatever the output's
shape. Kernels are compiled once per process and cached by their source text.

With numpy standing in for CuPy (arrays.array_module()), the callable evaluates the same
expressions with the reference evaluator the caller passes (the graph's fusion_ir.evaluate: this
layer knows no graph) over the arrays, so "gpu fusion" sessions run without a GPU;
tests/test_cuda_fuse.py compiles the generated body with gcc and
nvcc to check the C side.
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable

import numpy as np

from . import arrays as cuda

Expr = tuple
# A fused group (the graph's fusion_ir.FusedGroup, read by its fields: inputs, exprs, dtype,
# scalar_inputs, ...) and its reference evaluator (group, input arrays, xp) -> output arrays.
FusedGroup = Any
Evaluator = Callable[[Any, list, Any], list]

C_TYPES = {"float32": "float", "float64": "double"}   # fusion_ir makes float groups only

# Each fn's C text: {a} {b} {c} are its operands (locals or literals), {f} the math-function
# suffix ("f" for float32), {T} the C type, {zero} / {one} literals of it.
FLOAT_TEMPLATES = {
    "add": "{a} + {b}",
    "sub": "{a} - {b}",
    "mul": "{a} * {b}",
    "div": "{a} / {b}",
    "neg": "-{a}",
    "abs": "fabs{f}({a})",
    "exp": "exp{f}({a})",
    "log": "log{f}({a})",
    "sqrt": "sqrt{f}({a})",
    "rsqrt": "rsqrt{f}({a})",
    "tanh": "tanh{f}({a})",
    "sigmoid": "{one} / ({one} + exp{f}(-{a}))",
    "relu": "{a} < {zero} ? {zero} : {a}",             # NaN passes through, as numpy's maximum
    "max": "({a} >= {b} || {a} != {a}) ? {a} : {b}",  # NaN-propagating, as numpy's maximum
    "min": "({a} <= {b} || {a} != {a}) ? {a} : {b}",
    "pow": "pow{f}({a}, {b})",
    "square": "{a} * {a}",
    "lt": "({T})({a} < {b})",
    "le": "({T})({a} <= {b})",
    "gt": "({T})({a} > {b})",
    "ge": "({T})({a} >= {b})",
    "eq": "({T})({a} == {b})",
    "ne": "({T})({a} != {b})",
    "where": "{a} != {zero} ? {b} : {c}",
    "clamp": "{a} < {b} ? {b} : ({a} > {c} ? {c} : {a})",  # NaN passes through, as numpy's clip
}


class UnsupportedFusion(ValueError):
    """A group the CUDA renderer cannot express (an fn or dtype it does not know)."""


@dataclass(frozen=True)
class KernelSource:
    """The parts of one ElementwiseKernel, as CuPy takes them."""
    name: str
    in_params: str
    out_params: str
    operation: str

    def text(self) -> str:
        return (f"// {self.name}\n// in:  {self.in_params or '(none)'}\n// out: {self.out_params}\n"
                f"{self.operation}\n")


def _literal(value: float, dtype: str) -> str:
    """value as a C literal of dtype (inf and NaN as constant quotients, valid in C and CUDA)."""
    suffix = "f" if dtype == "float32" else ""
    with np.errstate(over="ignore"):
        typed = np.array(value, dtype=dtype)[()]   # rounded (or overflowed) as the IR casts it
    if math.isnan(typed):
        return f"(0.0{suffix} / 0.0{suffix})"
    if math.isinf(typed):
        return f"({'-' if typed < 0 else ''}1.0{suffix} / 0.0{suffix})"
    text = str(typed)   # the shortest text that reads back as this float32 / float64
    if "e" not in text and "." not in text:
        text += ".0"
    return f"({text}{suffix})" if typed < 0 else f"{text}{suffix}"


class _Renderer:
    """One group's body: locals t0, t1, ... in evaluation order, one per distinct inner node."""

    def __init__(self, dtype: str, scalar_inputs: frozenset[int], n_inputs: int) -> None:
        if dtype not in C_TYPES:
            raise UnsupportedFusion(f"fused CUDA kernel: dtype {dtype} is not one of {sorted(C_TYPES)}")
        self.dtype, self.ctype = dtype, C_TYPES[dtype]
        self.scalar_inputs, self.n_inputs = scalar_inputs, n_inputs
        self.lines: list[str] = []
        self.names: dict[Expr, str] = {}
        self.fill = {"f": "f" if dtype == "float32" else "", "T": self.ctype,
                     "zero": _literal(0.0, dtype), "one": _literal(1.0, dtype)}

    def operand(self, e: Expr) -> str:
        kind = e[0]
        if kind == "in":
            k = e[1]
            if not 0 <= k < self.n_inputs:
                raise UnsupportedFusion(f"fused CUDA kernel: input {k} of a group of {self.n_inputs} inputs")
            return f"x{k}[0]" if k in self.scalar_inputs else f"x{k}"
        if kind == "const":
            return _literal(e[1], self.dtype)
        if e in self.names:
            return self.names[e]
        template = FLOAT_TEMPLATES.get(kind)
        if template is None:
            raise UnsupportedFusion(f"fused CUDA kernel: fn {kind!r} has no CUDA rendering "
                                    f"(known: {', '.join(sorted(FLOAT_TEMPLATES))})")
        args = [self.operand(a) for a in e[1:]]
        text = template.format(**self.fill, **dict(zip("abc", args)))
        name = f"t{len(self.names)}"
        self.lines.append(f"const {self.ctype} {name} = {text};")
        self.names[e] = name
        return name


@lru_cache(maxsize=1024)
def render(group: FusedGroup) -> KernelSource:
    """The ElementwiseKernel parts of group (UnsupportedFusion for what CUDA cannot express)."""
    dtype = str(np.dtype(group.dtype))
    scalars = frozenset(group.scalar_inputs)
    r = _Renderer(dtype, scalars, len(group.inputs))
    outs = [f"y{j} = {r.operand(e)};" for j, e in enumerate(group.exprs)]
    operation = "\n".join(r.lines + outs)
    in_params = ", ".join(f"{'raw ' if k in scalars else ''}{dtype} x{k}" for k in range(len(group.inputs)))
    out_params = ", ".join(f"{dtype} y{j}" for j in range(len(group.exprs)))
    digest = hashlib.sha1(f"{in_params}|{out_params}|{operation}".encode()).hexdigest()[:12]
    return KernelSource(f"luabridge_fused_{digest}", in_params, out_params, operation)


def source(group: FusedGroup) -> str:
    """The generated kernel source of group: name, parameters and the elementwise body."""
    return render(group).text()


# ----------------------------------------------------------------------------------------------
# compiled kernels, once per process per source

_compiled: dict[tuple[str, str], Callable[..., None]] = {}
compile_count = 0   # kernels built so far (the cache's misses)


def _reference(group: FusedGroup, evaluate: Evaluator) -> Callable[..., None]:
    """The group evaluated by the reference evaluator over the arrays (numpy standing in)."""
    def run(*args: Any) -> None:
        ins, outs = args[:len(group.inputs)], args[len(group.inputs):]
        for value, out in zip(evaluate(group, list(ins), cuda.array_module()), outs):
            out[...] = value
    return run


def kernel(group: FusedGroup, evaluate: Evaluator) -> Callable[..., None]:
    """group's compiled kernel, called as kernel(*input_arrays, out) (one out per expression),
    writing into out. Built on the first call for its source, then taken from the cache; with
    numpy standing in, evaluate (fusion_ir.evaluate) runs it."""
    global compile_count
    src = render(group)
    xp = cuda.array_module()
    key = (xp.__name__, src.text())
    found = _compiled.get(key)
    if found is None:
        found = (_reference(group, evaluate) if xp is np else
                 xp.ElementwiseKernel(src.in_params, src.out_params, src.operation, src.name))
        _compiled[key] = found
        compile_count += 1
    return found


# the graph's "gpu fusion" executors reach this kernel through the CUDA device's entry of
# core/interop.py's DEVICES (set at start-up, as arrays.py sets the entry itself)
cuda.ARRAYS.fused_kernel = kernel
