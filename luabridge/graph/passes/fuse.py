"""The fusion pass: maximal groups of elementwise nodes become one `_fused` node each.

A group grows from a root (walked last to first) through the producers of its members' inputs:
a producer joins when it is elementwise (graph/fusion_ir.py's vocabulary covers it), has the
root's float dtype, the root's element count or one element (a broadcast operand), no control
dependencies, and every reader of its output is already a member (so no intermediate is read
elsewhere or fetched). The fused node runs where the root ran, so a member reading a variable
that some op writes between the member's place and the root's does not join (no fusing across a
write). nn activations fuse only without a `_backward` node (training graphs keep the module).
Runs after shape inference and before memory planning, which then sees the groups' inputs and
outputs only; the gradient pass runs before both, at graph-building time, so gradient graphs fuse.

The CPU form of a group (measured, bench/fusion.py): one LuaJIT loop per element ("loop") for
small groups of cheap fns, else numpy's SIMD loops per cache-sized block ("blocked"). A blocked
group with enough work runs its blocks in chunks on several threads at run time
(lua/luabridge/graph/fusion_threads.lua; torch.setnumthreads' count, never more than the free
CPUs), with the same values bit for bit.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable, Optional

import numpy as np

from ..fusion_ir import TRANSCENDENTAL, Expr, FusedGroup
from ..graph import Graph
from ..registry import Op, parse_float, register
from ..symbol import Entry, Node

FUSED = register(Op("_fused", num_inputs=lambda attrs: len(attrs["group"].inputs),
                    num_outputs=lambda attrs: len(attrs["group"].exprs),
                    input_names=lambda attrs: list(attrs["group"].inputs), hint="fused"))

FLOATS = ("float32", "float64")
# a group's size bounds (the generated Lua function keeps one local per sub-expression, input
# pointer and broadcast value, and Lua allows 200)
MAX_GROUP_NODES = 64
MAX_GROUP_OPERANDS = 48
# CPU form rule (measured with bench/fusion.py's chains): the per-element Lua loop has no call
# per op, so it wins on small groups (2-3x the unfused ops up to a few hundred elements); past
# that numpy's SIMD loops per block win (a cheap fn costs ~1 ns per element in the Lua loop,
# ~0.1-0.2 ns in numpy's). A transcendental fn is a scalar libm call in Lua (4-25x slower than
# numpy's SIMD exp / log / tanh), so groups with one take the blocked form sooner.
LOOP_MAX_ELEMENTS = 256
LOOP_MAX_ELEMENTS_TRANSCENDENTAL = 32


def _c(node: Node, dtype: str) -> Expr:
    """The node's "scalar" attribute as a constant of the group's type (as the unfused op casts it)."""
    return ("const", float(np.dtype(dtype).type(parse_float(node.attrs.get("scalar")))))


def _binary(fn: str) -> Callable:
    return lambda node, a, dt: (fn, a[0], a[1])


def _scalar(fn: str, reverse: bool = False) -> Callable:
    return lambda node, a, dt: (fn, _c(node, dt), a[0]) if reverse else (fn, a[0], _c(node, dt))


def _unary(fn: str) -> Callable:
    return lambda node, a, dt: (fn, a[0])


def _pow_scalar(node: Node, a: list, dt: str) -> Expr:
    c = _c(node, dt)
    return ("square", a[0]) if c[1] == 2 else ("pow", a[0], c)


def _sum(node: Node, a: list, dt: str) -> Expr:
    e = a[0]
    for x in a[1:]:
        e = ("add", e, x)
    return e


# op name -> (node, operand expressions, dtype) -> the node's expression
TRANSLATE: dict[str, Callable] = {
    **{n: _binary("add") for n in ("__add_symbol__", "add", "elemwise_add")},
    **{n: _binary("sub") for n in ("__sub_symbol__", "sub", "elemwise_sub")},
    **{n: _binary("mul") for n in ("__mul_symbol__", "mul", "elemwise_mul")},
    **{n: _binary("div") for n in ("__div_symbol__", "div", "elemwise_div")},
    "__pow_symbol__": _binary("pow"), "pow": _binary("pow"), "equal": _binary("eq"),
    "__add_scalar__": _scalar("add"), "__sub_scalar__": _scalar("sub"),
    "__rsub_scalar__": _scalar("sub", reverse=True), "__mul_scalar__": _scalar("mul"),
    "__div_scalar__": _scalar("div"), "__rdiv_scalar__": _scalar("div", reverse=True),
    "__pow_scalar__": _pow_scalar, "__rpow_scalar__": _scalar("pow", reverse=True),
    "exp": _unary("exp"), "log": _unary("log"), "sqrt": _unary("sqrt"),
    "relu": _unary("relu"), "tanh": _unary("tanh"),
    "__ewise_sum__": _sum, "add_n": _sum,
    "_sum_to_like": lambda node, a, dt: a[0],     # same shapes only (else a reduction)
    "zeros_like": lambda node, a, dt: ("const", 0.0),
    "ones_like": lambda node, a, dt: ("const", 1.0),
}
# ops whose input is only read for its shape: the expression does not take it
SHAPE_ONLY = {"zeros_like", "ones_like"}


class _Fuser:
    def __init__(self, graph: Graph, device: str) -> None:
        self.g = graph
        self.device = device
        self.shape, self.dtype = graph.attrs["shape"], graph.attrs["dtype"]
        self.pos = {id(n): i for i, n in enumerate(graph.nodes)}
        self.readers: dict[int, list] = {}   # eid -> reader nodes (None: a fetch)
        for n in graph.nodes:
            for eid in graph.input_eids(n):
                self.readers.setdefault(eid, []).append(n)
        for e in graph.outputs:
            self.readers.setdefault(graph.entry_id(e), []).append(None)
        self.has_backward = {id(n.forward) for n in graph.nodes if n.forward is not None}
        self.is_dep = {id(d) for n in graph.nodes for d in n.control_deps}
        self.writes: dict[int, list[int]] = {}   # variable node id -> positions of ops writing it
        for i, n in enumerate(graph.nodes):
            if n.op is not None:
                for k in n.op.mutate_inputs:
                    self.writes.setdefault(id(n.inputs[k].node), []).append(i)

    def numel(self, eid: int) -> int:
        return int(np.prod(self.shape[eid], dtype=np.int64))

    def fusable(self, n: Node) -> bool:
        if n.op is None or n.op.name not in TRANSLATE or n.num_outputs() != 1 or n.control_deps:
            return False
        if id(n) in self.has_backward or id(n) in self.is_dep or n.op.mutate_inputs:
            return False
        out = self.g.entry_id(n)
        if self.dtype[out] not in FLOATS or self.numel(out) == 0:
            return False
        ins = self.g.input_eids(n)
        if any(self.dtype[i] != self.dtype[out] for i in ins):
            return False
        return n.op.name != "_sum_to_like" or self.shape[ins[0]] == self.shape[out]

    def joins(self, p: Node, members: set, root: Node, size: int) -> bool:
        """Whether producer p may join the group of root (members: node ids)."""
        out = self.g.entry_id(p)
        if not self.fusable(p) or self.dtype[out] != self.dtype[self.g.entry_id(root)]:
            return False
        if self.numel(out) not in (size, 1):
            return False
        if any(r is None or id(r) not in members for r in self.readers[out]):
            return False
        lo, hi = self.pos[id(p)], self.pos[id(root)]
        return not any(lo < w < hi for e in p.inputs for w in self.writes.get(id(e.node), ()))

    def group(self, root: Node, taken: set) -> Optional[list[Node]]:
        size = self.numel(self.g.entry_id(root))
        members = {id(root)}
        order = [root]
        operands = set(self.g.input_eids(root))   # entries the group reads from outside
        grown = True
        while grown:
            grown = False
            for m in list(order):
                if m.op.name in SHAPE_ONLY:
                    continue
                for e in m.inputs:
                    p = e.node
                    if (len(order) < MAX_GROUP_NODES and id(p) not in members and id(p) not in taken
                            and len(operands | set(self.g.input_eids(p))) <= MAX_GROUP_OPERANDS + 1
                            and self.joins(p, members, root, size)):
                        members.add(id(p))
                        order.append(p)
                        operands = (operands | set(self.g.input_eids(p))) - {self.g.entry_id(p)}
                        grown = True
        return sorted(order, key=lambda n: self.pos[id(n)]) if len(order) > 1 else None

    def fused_node(self, members: list[Node]) -> Node:
        root = members[-1]
        ids = {id(m) for m in members}
        dt = self.dtype[self.g.entry_id(root)]
        size = self.numel(self.g.entry_id(root))
        inputs: list[Entry] = []
        slot: dict[int, int] = {}

        def expr(e: Entry) -> Expr:
            if id(e.node) in ids:
                n = e.node
                args = [] if n.op.name in SHAPE_ONLY else [expr(x) for x in n.inputs]
                return TRANSLATE[n.op.name](n, args, dt)
            eid = self.g.entry_id(e)
            if eid not in slot:
                slot[eid] = len(inputs)
                inputs.append(e)
            return ("in", slot[eid])

        body = expr(Entry(root, 0, 0))
        eids = [self.g.entry_id(e) for e in inputs]
        group = FusedGroup(tuple(self.g.entry_label(i) for i in eids), (body,), dt, self.device,
                           tuple(m.name for m in members),
                           frozenset(k for k, i in enumerate(eids) if self.numel(i) == 1 and size > 1))
        transcendental = any(fn in TRANSCENDENTAL for fn in group.fns())
        limit = LOOP_MAX_ELEMENTS_TRANSCENDENTAL if transcendental else LOOP_MAX_ELEMENTS
        # the kernels read element i of every input before writing element i of the output
        op = replace(FUSED, inplace=[(k, 0) for k in range(len(inputs))])
        return Node(op, root.name, {"group": group, "form": "loop" if size <= limit else "blocked"},
                    inputs)


def fuse(graph: Graph, device: str = "cpu") -> Graph:
    """graph with its elementwise groups fused (needs attrs "shape" and "dtype"); attrs
    "fusion" lists each group's node names, in graph order."""
    f = _Fuser(graph, device)
    taken: set[int] = set()
    groups: dict[int, list[Node]] = {}   # root id -> members
    for n in reversed(graph.nodes):
        if id(n) in taken or not f.fusable(n):
            continue
        members = f.group(n, taken)
        if members:
            taken.update(id(m) for m in members)
            groups[id(n)] = members
    if not groups:
        return graph.with_attrs(fusion=[])
    nodes, old = [], []   # the new order, and the node each one stands for
    for n in graph.nodes:
        if id(n) in groups:
            nodes.append(f.fused_node(groups[id(n)]))
        elif id(n) in taken:
            continue
        else:
            nodes.append(n)
        old.append(n)
    g = Graph.from_nodes(graph.outputs, nodes)
    for new, prev in zip(nodes, old):
        if new is not prev:
            g.node_ids[id(prev)] = g.node_ids[id(new)]   # the root's entries are the fused node's
    shape: list = [None] * g.num_entries
    dtype: list = [None] * g.num_entries
    for prev in old:
        for a, b in zip(g.output_eids(prev), graph.output_eids(prev)):
            shape[a], dtype[a] = f.shape[b], f.dtype[b]
    fusion = [[m.name for m in groups[id(n)]] for n in old if id(n) in groups]
    return g.with_attrs(**dict(graph.attrs, shape=shape, dtype=dtype, fusion=fusion))
