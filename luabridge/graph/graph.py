"""The Graph: a topologically ordered node list, entry ids and per-entry attribute arrays.
Passes are functions from a Graph to a Graph with more attributes."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from .symbol import Entry, Node, Symbol, topo_nodes


@dataclass
class Graph:
    outputs: list            # list[Entry]
    nodes: list = field(default_factory=list)       # topological order
    node_ids: dict = field(default_factory=dict)    # id(node) -> index in nodes
    entry_start: list = field(default_factory=list)  # nid -> id of its first entry
    attrs: dict = field(default_factory=dict)        # "shape", "dtype", "storage_id", ...

    @classmethod
    def create(cls, outputs: Iterable[Entry] | Symbol) -> "Graph":
        outs = list(outputs.outputs if isinstance(outputs, Symbol) else outputs)
        return cls.from_nodes(outs, topo_nodes(outs))

    @classmethod
    def from_nodes(cls, outputs: list, nodes: list) -> "Graph":
        """The graph of outputs with its nodes in the given (topological) order, indexed."""
        g = cls(outputs, nodes)
        g.node_ids = {id(n): i for i, n in enumerate(nodes)}
        start = 0
        for n in nodes:
            g.entry_start.append(start)
            start += n.num_outputs()
        g.entry_start.append(start)
        return g

    @property
    def num_entries(self) -> int:
        return self.entry_start[-1]

    def nid(self, node: Node) -> int:
        return self.node_ids[id(node)]

    def entry_id(self, e: Entry | Node, index: int = 0) -> int:
        if isinstance(e, Node):
            return self.entry_start[self.node_ids[id(e)]] + index
        return self.entry_start[self.node_ids[id(e.node)]] + e.index

    def input_eids(self, node: Node) -> list[int]:
        return [self.entry_id(e) for e in node.inputs]

    def output_eids(self, node: Node) -> list[int]:
        s = self.entry_start[self.node_ids[id(node)]]
        return list(range(s, s + node.num_outputs()))

    def entry_of(self, eid: int) -> tuple[Node, int]:
        """(node, output index) of an entry id."""
        import bisect
        nid = bisect.bisect_right(self.entry_start, eid) - 1
        return self.nodes[nid], eid - self.entry_start[nid]

    def entry_label(self, eid: int) -> str:
        node, i = self.entry_of(eid)
        return node.name if node.op is None or node.num_outputs() == 1 else f"{node.name}[{i}]"

    def with_attrs(self, **attrs: Any) -> "Graph":
        """A copy sharing the structure, with attributes added or replaced."""
        g = Graph(self.outputs, self.nodes, self.node_ids, self.entry_start, dict(self.attrs))
        g.attrs.update(attrs)
        return g
