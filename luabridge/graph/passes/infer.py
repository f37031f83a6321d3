"""Shape and type inference: forward and backward sweeps over the graph until nothing changes.
Backward ops take their output shapes/types from their forward node's inputs."""
from __future__ import annotations

import inspect
from typing import Any, Callable, Optional

from ..graph import Graph
from ..symbol import Entry, Node, entry_name
from .order_mutation import build_graph

DEFAULT_DTYPE = "float32"


class InferenceError(ValueError):
    """Inconsistent or incomplete shapes/types; the message names the nodes."""


def infer_shapes(graph: Graph, shapes: Optional[list] = None, dtypes: Optional[list] = None) -> Graph:
    """graph with attrs "shape" and "dtype" (lists by entry id) completed from the known ones
    (None where unknown); InferenceError names the nodes left unknown or inconsistent."""
    n = graph.num_entries
    shape = _solve(graph, list(shapes or [None] * n), "shape", _shape_rule, _as_shape)
    dtype = _solve(graph, list(dtypes or [None] * n), "type", _type_rule, str, fallback=DEFAULT_DTYPE)
    return graph.with_attrs(shape=shape, dtype=dtype)


def infer_symbol_shapes(symbol: Any, known: dict, dtypes: Optional[dict] = None) -> dict:
    """Shapes of a symbol's graph from the shapes of some nodes by name (placeholders,
    variables): {node name (variables, placeholders) or output entry name: shape or None}."""
    g = build_graph(list(symbol.outputs))
    shapes: list = [None] * g.num_entries
    types: list = [None] * g.num_entries
    for n in g.nodes:
        if n.name in known and n.num_outputs() >= 1:
            shapes[g.entry_id(n)] = _as_shape(known[n.name])
        if dtypes and n.name in dtypes:
            types[g.entry_id(n)] = str(dtypes[n.name])
    shape = _solve(g, shapes, "shape", _shape_rule, _as_shape, strict=False)
    out = {}
    for n in g.nodes:
        for i in range(n.num_outputs()):
            key = n.name if n.op is None or (n.op.name == "placeholder") else entry_name(Entry(n, i, 0))
            out[key] = shape[g.entry_id(n, i)]
    return out


def _as_shape(s: Any) -> tuple:
    return tuple(int(d) for d in s)


_ARITY: dict[Callable, int] = {}


def _call(fn: Callable, attrs: dict, ins: list, outs: list) -> tuple:
    """An infer function takes (attrs, ins) or (attrs, ins, outs)."""
    n = _ARITY.get(fn)
    if n is None:
        try:
            params = inspect.signature(fn).parameters.values()
            n = 3 if sum(p.kind != p.VAR_KEYWORD for p in params) >= 3 else 2
        except (TypeError, ValueError):
            n = 2
        _ARITY[fn] = n
    return fn(attrs, list(ins), list(outs)) if n == 3 else fn(attrs, list(ins))


def _shape_rule(node: Node) -> Optional[Callable]:
    return node.op.infer_shape


def _type_rule(node: Node) -> Callable:
    return node.op.infer_type or _default_type


def _default_type(attrs: dict, ins: list, outs: list) -> tuple:
    """All inputs and outputs share one type: the first known (float32 when nothing says)."""
    known = next((t for t in list(ins) + list(outs) if t is not None), None)
    return [known] * len(ins), [known] * len(outs)


def _solve(graph: Graph, values: list, what: str, rule: Callable, norm: Callable, strict: bool = True,
           fallback: Any = None) -> list:
    order = [n for n in graph.nodes if n.op is not None]
    while True:
        for _ in range(4 * len(order) + 2):
            changed = False
            for sweep in (order, order[::-1]):
                for node in sweep:
                    changed |= _visit(graph, node, values, what, rule, norm)
            if not changed:
                break
        # what nothing determines takes the fallback, one entry at a time (it may decide others)
        first = next((i for i, v in enumerate(values) if v is None), None)
        if fallback is None or first is None:
            break
        values[first] = fallback
    unknown = [graph.entry_label(i) for i, v in enumerate(values) if v is None]
    if unknown and strict:
        nodes = sorted(set(unknown), key=unknown.index)
        raise InferenceError(f"{what} inference: the {what} of {', '.join(nodes[:20])}"
                             f"{' ...' if len(nodes) > 20 else ''} stays unknown "
                             "(feed its placeholder, initialise its variable or give the op's attributes)")
    return values


def _visit(graph: Graph, node: Node, values: list, what: str, rule: Callable, norm: Callable) -> bool:
    in_ids, out_ids = graph.input_eids(node), graph.output_eids(node)
    changed = False
    fwd = node.forward
    if node.op.is_backward and fwd is not None and id(fwd) in graph.node_ids:
        # output i is the gradient of the forward node's input i
        for i, e in enumerate(fwd.inputs[:len(out_ids)]):
            changed |= _merge(graph, node, out_ids[i], values[graph.entry_id(e)], values, what, norm)
    fn = rule(node)
    if fn is None:
        return changed
    ins, outs = [values[i] for i in in_ids], [values[i] for i in out_ids]
    try:
        new_ins, new_outs = _call(fn, node.attrs, ins, outs)
    except InferenceError:
        raise
    except ValueError as e:
        raise InferenceError(f"{what} inference: {node.op.name} (node {node.name!r}): {e}; "
                             f"input {what}s {_fmt(ins)}") from None
    except Exception as e:  # noqa: BLE001 - an infer function meeting unknown inputs
        if any(v is None for v in ins):
            return changed
        raise InferenceError(f"{what} inference: {node.op.name} (node {node.name!r}) failed on "
                             f"input {what}s {_fmt(ins)}: {type(e).__name__}: {e}") from None
    for eid, v in list(zip(in_ids, new_ins or ())) + list(zip(out_ids, new_outs or ())):
        changed |= _merge(graph, node, eid, v, values, what, norm)
    return changed


def _merge(graph: Graph, node: Node, eid: int, v: Any, values: list, what: str, norm: Callable) -> bool:
    if v is None:
        return False
    v = norm(v)
    old = values[eid]
    if old is None:
        values[eid] = v
        return True
    if old != v:
        raise InferenceError(f"{what} inference: {node.op.name} (node {node.name!r}) needs {what} "
                             f"{_fmt1(v)} for {graph.entry_label(eid)}, which has {_fmt1(old)}")
    return False


def _fmt1(v: Any) -> str:
    return "?" if v is None else ("(" + "x".join(map(str, v)) + ")" if isinstance(v, tuple) else str(v))


def _fmt(vs: list) -> str:
    return "[" + ", ".join(_fmt1(v) for v in vs) + "]"
