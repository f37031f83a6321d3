"""Mixed graphs: any Lua module as one node (its parameters become graph variables), any
Python function over numpy arrays as an op."""
from __future__ import annotations

import itertools
import weakref
from typing import Any, Callable, Optional, Sequence, Union

import numpy as np

from ..core.proxy import unwrap
from ..core.runtime import bridge
from ..core.interop import to_numpy
from . import registry
from .registry import NNCompute, Op, PythonCompute
from .symbol import Entry, Node, Symbol, Variable, create, names

_INITIAL: "weakref.WeakKeyDictionary[Node, np.ndarray]" = weakref.WeakKeyDictionary()
_counter = itertools.count()


def initial_value(node: Node) -> Optional[np.ndarray]:
    """A variable's value before any assignment (a lua_module parameter's own reset), if any."""
    return _INITIAL.get(node)


def lua_module(inputs: Union[Symbol, Sequence[Symbol]], module: Any, name: Optional[str] = None,
               dtype: str = "float32") -> Symbol:
    """One node running a Lua nn module (or criterion: inputs [input, target], output the loss).
    `module`: a constructor string such as "nn.Linear(784,128)", or a Lua module object (e.g.
    from luabridge.dofile). Its parameters become graph variables "<name>_<field>" (weight,
    bias, ...) initialised from the module's own values (its reset); the module itself is then
    driven by the graph (its parameter tensors are re-pointed at the graph's variables)."""
    from .device import CPU
    b = bridge()
    h = b.module("luabridge.graph.api")
    ins = [inputs] if isinstance(inputs, Symbol) else list(inputs)
    m = b.call(h.build, module) if isinstance(module, str) else unwrap(module)
    typename = CPU.lua_type(dtype)
    m, criterion, W, pnames, probe = b.call(h.describe, m, typename)
    n_params = len(W)
    n_data = 2 if criterion else 1
    if len(ins) != n_data:
        raise ValueError(f"lua_module: a {'criterion' if criterion else 'module'} takes {n_data} input(s), got {len(ins)}")
    name = names.get(name, "lua_module")
    values = [to_numpy(W[i + 1]).copy() for i in range(n_params)]
    pnames = [pnames[i + 1] for i in range(n_params)]
    shapes: dict[tuple, tuple] = {}

    def infer(attrs: dict, in_shapes: list) -> tuple:
        in_shapes = list(in_shapes)
        for i, v in enumerate(values):
            in_shapes[n_data + i] = v.shape
        if criterion:
            return in_shapes, [(1,)]
        if in_shapes[0] is None:
            return in_shapes, [None]
        key = tuple(in_shapes[0])
        if key not in shapes:
            sizes = b.call(h.probe, probe, b.lua.table_from(list(key)), typename)
            shapes[key] = tuple(int(sizes[i + 1]) for i in range(len(sizes)))
        return in_shapes, [shapes[key]]

    op = registry.register(Op(
        f"lua_module:{name}:{next(_counter)}", num_inputs=n_data + n_params,
        input_names=(["data", "target"] if criterion else ["data"]) + pnames,
        infer_shape=infer, infer_type=lambda attrs, ins: ([dtype] * len(ins), [dtype]),
        compute=NNCompute(b.lua.eval("function(m) return function() return m end end")(m), criterion=criterion),
        hint="lua_module"))
    params = [Variable(f"{name}_{p}") for p in pnames]
    for p, v in zip(params, values):
        _INITIAL[p.outputs[0].node] = v
    return create(op.name, *ins, *params, name=name)


def python_op(fn: Callable, infer_shape: Optional[Callable] = None, grad: Optional[Callable] = None,
              num_outputs: int = 1, name: Optional[str] = None,
              graph_grad: Optional[Callable] = None) -> Callable[..., Symbol]:
    """An op running fn(*input_arrays) -> array (or a tuple of num_outputs arrays) over numpy
    arrays. infer_shape(*input_shapes) -> shape (or a list of shapes); default: the first
    input's shape. grad(inputs, outputs, output_grads) -> one gradient array (or None for
    none) per input; or graph_grad(inputs, outputs, output_grads), the same over symbols,
    returning symbols (or None): a graph, which can be differentiated again. Returns a
    function making nodes: op(*input_symbols, name=None)."""
    if grad is not None and graph_grad is not None:
        raise ValueError("python_op: give grad or graph_grad, not both")
    hint = name or getattr(fn, "__name__", "python_op").strip("<>_") or "python_op"
    op_name = f"python_op:{hint}:{next(_counter)}"

    def compute(ins: list, outs: list, attrs: dict) -> None:
        res = fn(*ins)
        res = (res,) if num_outputs == 1 else tuple(res)
        if len(res) != num_outputs:
            raise ValueError(f"{hint}: returned {len(res)} outputs, expected {num_outputs}")
        for o, r in zip(outs, res):
            o[...] = r

    def infer(attrs: dict, in_shapes: list) -> tuple:
        if any(s is None for s in in_shapes):
            return in_shapes, [None] * num_outputs
        if infer_shape is None:
            return in_shapes, [in_shapes[0]] * num_outputs
        res = infer_shape(*in_shapes)
        return in_shapes, [tuple(res)] if num_outputs == 1 else [tuple(s) for s in res]

    gradient = None
    if grad is not None:
        gradient = _python_gradient(grad, hint, op_name, num_outputs)
    elif graph_grad is not None:
        gradient = _graph_gradient(graph_grad, num_outputs)
    registry.register(Op(op_name, num_inputs=lambda attrs: int(attrs["num_args"]),
                         num_outputs=num_outputs,
                         input_names=lambda attrs: [f"arg{i}" for i in range(int(attrs["num_args"]))],
                         infer_shape=infer, compute=PythonCompute(compute), gradient=gradient, hint=hint))

    def make(*inputs: Symbol, name: Optional[str] = None) -> Symbol:
        return create(op_name, *inputs, name=name, num_args=len(inputs))
    make.op_name = op_name
    return make


def _python_gradient(grad: Callable, hint: str, op_name: str, num_outputs: int) -> Callable:
    """The gradient of a python_op: one backward Python node reading the forward inputs,
    outputs and output gradients; output i is the gradient of forward input i."""
    def compute(ins: list, outs: list, attrs: dict) -> None:
        n = len(outs)
        res = grad(ins[:n], ins[n:n + num_outputs], ins[n + num_outputs:])
        if len(res) != n:
            raise ValueError(f"{hint} gradient: returned {len(res)} gradients for {n} inputs")
        for o, r in zip(outs, res):
            if r is None:
                o[...] = 0
            else:
                o[...] = r

    back = registry.register(Op(
        op_name + ":backward", num_inputs=lambda attrs: int(attrs["num_args"]),
        num_outputs=lambda attrs: int(attrs["forward_inputs"]),
        input_names=lambda attrs: [f"arg{i}" for i in range(int(attrs["num_args"]))],
        is_backward=True, compute=PythonCompute(compute), hint=hint + "_backward"))

    def gradient(node: Node, out_grads: list[Entry]) -> list:
        inputs = list(node.inputs) + [Entry(node, i, 0) for i in range(num_outputs)] + list(out_grads)
        n_in = len(node.inputs)
        bnode = Node(back, f"{node.name}_backward",
                     {"num_args": str(len(inputs)), "forward_inputs": str(n_in)}, inputs, [node], forward=node)
        return [Entry(bnode, i, 0) for i in range(n_in)]
    return gradient


def _graph_gradient(graph_grad: Callable, num_outputs: int) -> Callable:
    """The gradient of a python_op as the graph that graph_grad builds over symbols."""
    def gradient(node: Node, out_grads: list[Entry]) -> list:
        outputs = [Symbol([Entry(node, i, 0)]) for i in range(num_outputs)]
        return list(graph_grad([Symbol([e]) for e in node.inputs], outputs, [Symbol([g]) for g in out_grads]))
    return gradient
