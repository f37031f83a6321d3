"""The op registry: what each graph op takes, gives, infers and how it computes."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Union

# A gradient rule's node argument is a symbol.Node (symbol.py imports this module: Any here).
NodeRef = Any

Shape = Optional[tuple]  # a tuple of ints, or None while unknown


@dataclass
class LuaCompute:
    """Lua source of `function(x, y, kwarg) return function() ... end end`: x and y are Lua lists
    of the input and output tensors (the planned buffers), kwarg the string attributes. The factory
    runs once per executor build; the closure it returns runs on every call."""
    source: str


@dataclass
class NNCompute:
    """Lua source of `function(ishape, kwarg) return nn.X(...) end` (ishape: Lua list of input
    shapes as Lua lists). Inputs are [data, (target,) parameters..., states...]: the parameters
    are bound in module:parameters() order; `states` names module fields (e.g. running_mean)
    bound to the trailing inputs, which get no gradient."""
    source: str
    criterion: bool = False      # input 2 is the target; output is the scalar loss
    need_inputs: bool = True     # the backward reads the forward inputs
    need_outputs: bool = True    # the backward reads the forward output
    states: tuple = ()           # module fields bound to the last len(states) inputs
    # the second derivative: (its `_backward` node, gradients of that node's outputs) ->
    # gradients of that node's inputs, as graph expressions (None: the op has none)
    backward_gradient: Optional[Callable[[NodeRef, list], list]] = None


@dataclass
class PythonCompute:
    """fn(inputs, outputs, attrs) writes the outputs (numpy arrays on CPU, CuPy on GPU, which
    share the planned buffers)."""
    fn: Callable[[list, list, dict], None]


@dataclass
class Op:
    name: str
    num_inputs: Union[int, Callable[[dict], int]] = 1
    num_outputs: Union[int, Callable[[dict], int]] = 1
    input_names: Union[tuple, list, Callable[[dict], list]] = ("data",)
    # (attrs, in_shapes with None for unknown) -> (in_shapes, out_shapes), filling what it can;
    # raise ValueError on inconsistent shapes
    infer_shape: Optional[Callable[[dict, list], tuple]] = None
    # (attrs, in_types with None for unknown) -> (in_types, out_types); default: all float32
    infer_type: Optional[Callable[[dict, list], tuple]] = None
    # (forward node, output gradients) -> input gradients (None: no gradient, zeros used)
    gradient: Optional[Callable[[NodeRef, list], list]] = None
    inplace: Union[list, tuple] = ()          # (input, output) pairs that may share storage
    mutate_inputs: Union[list, tuple] = ()    # inputs this op writes (assign: 0)
    is_backward: bool = False                 # shapes come from the forward node
    compute: Union[LuaCompute, NNCompute, PythonCompute, None] = None
    hint: Optional[str] = None                # automatic-name prefix (default: the op name)

    def n_inputs(self, attrs: dict) -> int:
        return self.num_inputs(attrs) if callable(self.num_inputs) else self.num_inputs

    def n_outputs(self, attrs: dict) -> int:
        return self.num_outputs(attrs) if callable(self.num_outputs) else self.num_outputs

    def list_input_names(self, attrs: dict) -> list:
        names = self.input_names(attrs) if callable(self.input_names) else self.input_names
        return list(names)


_OPS: dict[str, Op] = {}


def register(op: Op) -> Op:
    """Adds (or replaces) an op; returns it."""
    _OPS[op.name] = op
    return op


def get(name: str) -> Op:
    """The op of that name (the op library registers itself when luabridge.graph is imported)."""
    op = _OPS.get(name)
    if op is None:
        raise KeyError(f"graph op {name!r} is not registered")
    return op


def has(name: str) -> bool:
    try:
        get(name)
    except KeyError:
        return False
    return True


def names() -> list[str]:
    return sorted(_OPS)


# ---- attribute helpers (attributes are strings, as nnvm's) ----

def attr_str(value: Any) -> str:
    """An attribute value as its string: tuples as "[10,20]", bools as "True"/"False"."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(attr_str(v) for v in value) + "]"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def parse_tuple(s: Optional[str], default: Optional[tuple] = None) -> Optional[tuple]:
    """"[10,20]" / "(10, 20)" / "10" -> (10, 20) / (10,); multi-digit numbers stay whole."""
    if s is None:
        return default
    body = s.strip().strip("[]()").replace(" ", "")
    return tuple(int(p) for p in body.split(",") if p) if body else ()


def parse_bool(s: Optional[str], default: bool = False) -> bool:
    if s is None:
        return default
    v = s.strip().lower()
    if v in ("true", "1"):
        return True
    if v in ("false", "0"):
        return False
    raise ValueError(f"not a boolean attribute: {s!r}")


def parse_float(s: Optional[str], default: float = 0.0) -> float:
    return default if s is None else float(s)


def parse_int(s: Optional[str], default: int = 0) -> int:
    return default if s is None else int(s)
