"""Mutation ordering: the pass that makes the executor's graph from the fetched entries, with
the ops that mutate a variable ordered among that variable's readers (by Entry.version)."""
from __future__ import annotations

from ..graph import Graph
from ..symbol import Entry, Node, topo_nodes


def _late_sources(nodes: list[Node]) -> list[Node]:
    """The order with each input-less op (placeholders, constants) moved to just before its first
    consumer, so its buffer is live no longer than needed."""
    movable = {id(n) for n in nodes if n.op is not None and not n.inputs and not n.control_deps}
    order: list[Node] = []
    placed: set[int] = set()
    for n in nodes:
        if id(n) in movable:
            continue
        for e in n.inputs:
            if id(e.node) in movable and id(e.node) not in placed:
                placed.add(id(e.node))
                order.append(e.node)
        order.append(n)
    order += [n for n in nodes if id(n) in movable and id(n) not in placed]
    return order


def build_graph(outputs: list[Entry]) -> Graph:
    """The graph of the fetched entries, ordered so that an op mutating a variable runs after
    the readers of its older versions and before the readers of its newer ones, with input-less
    ops placed late."""
    nodes = topo_nodes(outputs)
    extra = _mutation_order(nodes)
    if extra:
        nodes = topo_nodes(outputs, extra)
    return Graph.from_nodes(outputs, _late_sources(nodes))


def _mutation_order(nodes: list[Node]) -> dict[int, list[Node]]:
    """Extra predecessors by node id, from Entry.version of the variables ops mutate."""
    uses: dict[int, list[tuple[Node, int, bool]]] = {}
    for n in nodes:
        if n.op is None:
            continue
        mutated = set(n.op.mutate_inputs)
        for i, e in enumerate(n.inputs):
            if e.node.op is None:
                uses.setdefault(id(e.node), []).append((n, e.version, i in mutated))
    extra: dict[int, list[Node]] = {}
    for var_uses in uses.values():
        for m, ver, mutates in var_uses:
            if not mutates:
                continue
            for r, rver, _ in var_uses:
                if r is m:
                    continue
                if rver < ver:
                    extra.setdefault(id(m), []).append(r)
                elif rver >= ver and not _mutation_of(var_uses, r, rver):
                    extra.setdefault(id(r), []).append(m)
    return extra


def _mutation_of(var_uses: list, node: Node, version: int) -> bool:
    return any(n is node and mut and v == version for n, v, mut in var_uses)
