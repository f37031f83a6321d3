"""The gradient pass: reverse topological order over the nodes between ys and xs; gradients
reaching one entry from several consumers are summed; an x the ys do not depend on gets zeros.
An nn (NNCompute) node gets one `_backward` node computing all its input gradients."""
from __future__ import annotations

from typing import Optional, Sequence, Union

from .. import registry
from ..registry import NNCompute, attr_str
from ..symbol import Entry, Node, Symbol, create, topo_nodes


def gradients(ys: Union[Symbol, Sequence[Symbol]], xs: Union[Symbol, Sequence[Symbol]],
              grad_ys: Optional[Sequence[Symbol]] = None) -> list[Symbol]:
    """d(sum of ys * grad_ys)/d(x) for each x, as symbols (grad_ys default to ones)."""
    y_entries = _entries(ys)
    g_entries = None if grad_ys is None else _entries(grad_ys)
    return [Symbol([e]) for e in gradient(y_entries, _entries(xs), g_entries)]


def _entries(s: Union[Symbol, Sequence[Symbol]]) -> list[Entry]:
    if isinstance(s, Symbol):
        return list(s.outputs)
    return [e for sym in s for e in sym.outputs]


def gradient(ys: list[Entry], xs: list[Entry], grad_ys: Optional[list[Entry]] = None) -> list[Entry]:
    if grad_ys is not None and len(grad_ys) != len(ys):
        raise ValueError(f"gradients: {len(ys)} ys but {len(grad_ys)} grad_ys")
    nodes = topo_nodes(ys)
    x_keys = {_key(x) for x in xs}
    depends = _depends_on(nodes, {id(x.node) for x in xs})
    grads: dict[tuple, list[Entry]] = {}
    for i, y in enumerate(ys):
        seed = grad_ys[i] if grad_ys is not None else _make("ones_like", [y])
        grads.setdefault(_key(y), []).append(seed)
    for node in reversed(nodes):
        if node.op is None or not node.inputs or id(node) not in depends or node.op.mutate_inputs:
            continue
        outs = [grads.get((id(node), i)) for i in range(node.num_outputs())]
        if not any(outs):
            continue
        out_grads = [_sum(g, node) if g else _make("zeros_like", [Entry(node, i, 0)])
                     for i, g in enumerate(outs)]
        for e, g in zip(node.inputs, _input_grads(node, out_grads)):
            if g is not None and (id(e.node) in depends or _key(e) in x_keys):
                grads.setdefault(_key(e), []).append(g)
    return [_sum(grads[_key(x)], x.node) if _key(x) in grads else _make("zeros_like", [x])
            for x in xs]


def _key(e: Entry) -> tuple:
    return id(e.node), e.index


def _depends_on(nodes: list[Node], x_ids: set) -> set:
    """ids of the nodes that are xs or read one (through inputs)."""
    dep: set = set()
    for n in nodes:
        if id(n) in x_ids or any(id(e.node) in dep for e in n.inputs):
            dep.add(id(n))
    return dep


def _make(op_name: str, inputs: list[Entry], **attrs) -> Entry:
    return create(op_name, *(Symbol([e]) for e in inputs), **attrs).outputs[0]


def _sum(gs: list[Entry], node: Node) -> Entry:
    if len(gs) == 1:
        return gs[0]
    return _make("__ewise_sum__", gs, num_args=len(gs), name=f"{node.name}_grad_sum")


def _input_grads(node: Node, out_grads: list[Entry]) -> list[Optional[Entry]]:
    op = node.op
    if isinstance(op.compute, NNCompute):
        return nn_backward(node, out_grads)
    if op.gradient is None:
        what = "second derivative" if op.is_backward else "gradient"
        raise ValueError(f"gradients: op {op.name!r} (node {node.name!r}) has no {what}")
    res = list(op.gradient(node, out_grads))
    if len(res) != len(node.inputs):
        raise ValueError(f"gradients: op {op.name!r} (node {node.name!r}) gave {len(res)} "
                         f"gradients for {len(node.inputs)} inputs")
    return [g.outputs[0] if isinstance(g, Symbol) else g for g in res]


def nn_backward(node: Node, out_grads: list[Entry]) -> list[Optional[Entry]]:
    """One `_backward` node for an nn node: inputs [output grad, forward inputs if needed,
    forward output if needed]; output i is the gradient of forward input i (None for the
    criterion target and the states)."""
    lm: NNCompute = node.op.compute
    if len(out_grads) != 1:
        raise ValueError(f"gradients: nn op {node.op.name!r} (node {node.name!r}) must have one output")
    n_fwd, n_states = len(node.inputs), len(lm.states)
    attrs = {"forward_inputs": n_fwd, "need_inputs": lm.need_inputs, "need_outputs": lm.need_outputs,
             "no_grad_inputs": 1 if lm.criterion else 0, "num_states": n_states}
    inputs = [out_grads[0]] + (list(node.inputs) if lm.need_inputs else [])
    inputs += [Entry(node, 0, 0)] if lm.need_outputs else []
    back = Node(registry.get("_backward"), f"{node.name}_backward",
                {k: attr_str(v) for k, v in attrs.items()}, inputs, [node], forward=node)
    no_grad = {1} if lm.criterion else set()
    no_grad |= set(range(n_fwd - n_states, n_fwd))
    return [None if i in no_grad else Entry(back, i, 0) for i in range(n_fwd)]
