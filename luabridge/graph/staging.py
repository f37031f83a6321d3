"""The machinery behind luabridge.graph.compile: per input signature, every entry's shape and
type, a copy of each stage's nodes reading placeholders for the values fed to it, and chains of
executors (one per stage, sharing their nn modules) that run them."""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Optional, Protocol

import numpy as np

from ..core.runtime import bridge
from .api import initial_value
from .executor import Executor, closures_module
from .graph import Graph
from .passes.infer import infer_shapes
from .registry import NNCompute, Op, attr_str, get
from .session import Session
from .symbol import Entry, Node


class StagedOwner(Protocol):
    """What a stage plan reads of the compile.StagedFunction owning it (compile.py builds the
    plans, so this module names it by what it reads)."""
    stages: list
    stage_of: dict
    private_ops: Any
    session: Any


Key = tuple  # (id(node), output index) of an entry of the compiled graph


def entry_key(e: Entry) -> Key:
    """The key of an entry of the compiled graph (its node stays alive with the function)."""
    return id(e.node), e.index


def is_leaf_kind(node: Node) -> bool:
    """Variables and placeholders: what a stage is fed, never computes."""
    return node.op is None or node.op.name == "placeholder"


@dataclass
class Stage:
    """One stage of a compiled graph (stage 0: the forward; k + 1: the gradient of k)."""
    index: int
    grad_inputs: list      # list[Entry]: what this stage is called with (stage 0: the inputs)
    outputs: list          # list[Entry]: its results
    nodes: list = field(default_factory=list)      # the nodes it computes, in order
    reads: list = field(default_factory=list)      # keys it reads from elsewhere (fed)
    direct: list = field(default_factory=list)     # keys of results it does not compute
    saves: list = field(default_factory=list)      # keys it computes that later stages read
    keep: list = field(default_factory=list)       # keys the next closure holds


class StageExecutor(Executor):
    """An executor of one stage's graph copy: shapes come from the whole compiled graph's
    inference, and nn backward nodes find their forward's module in the chain's table."""

    def __init__(self, session: Session, fetches: list[Entry], known: dict, modules: dict) -> None:
        super().__init__(session, fetches)
        self.known, self.modules = known, modules

    def prepare(self) -> None:
        """Plans memory and builds the closures now, for feeds of the known shapes."""
        for v in self.read_vars:
            self.session._states.ensure_initialised(v)
        self._build([np.zeros(self.known[(id(p), 0)][0], dtype) for p, dtype in zip(self.placeholders, self.feed_dtypes)])

    def _infer(self, g: Graph, shapes: list, dtypes: list) -> Graph:
        for n in g.nodes:
            for i in range(n.num_outputs()):
                shapes[g.entry_id(n, i)], dtypes[g.entry_id(n, i)] = self.known[(id(n), i)]
        return super()._infer(g, shapes, dtypes)

    def _step(self, g: Graph, node: Node, ins: list, outs: list, views: list, modules: dict) -> Any:
        return super()._step(g, node, ins, outs, views, self.modules)


class SignaturePlan:
    """The stage graphs of one input signature: every entry's shape and type, and per stage a
    copy of its nodes reading placeholders (the fed values) and fetching its results and saves."""

    def __init__(self, fn: StagedOwner, values: list[np.ndarray]) -> None:
        self.fn = fn
        self.known = self._infer(values)
        self.copies: dict[int, Node] = {}
        copy_known: dict[Key, tuple] = {}
        self.feeds: list[list] = []
        self.fetches: list[list] = []
        self.fetch_keys: list[list] = []
        for st in fn.stages:
            feeds = {k: self._placeholder(k, copy_known) for k in st.reads}
            for n in st.nodes:
                self._copy(n, feeds, copy_known)
            results = {entry_key(e): e for e in st.outputs if entry_key(e) not in st.direct}
            keys = list(dict.fromkeys(list(results) + st.saves))
            self.fetch_keys.append(keys)
            self.fetches.append([self._copied_entry(k, feeds, results.get(k)) for k in keys])
            self.feeds.append([(k, feeds[k].node) for k in st.reads])
        self.copy_known = {**self.known, **copy_known}   # variables appear as themselves
        self._chains: list[Chain] = []

    def _infer(self, values: list[np.ndarray]) -> dict[Key, tuple]:
        """Shapes and types of every entry, stage by stage (a stage's gradient inputs have the
        shapes and types of the results they belong to)."""
        fn = self.fn
        known: dict[Key, tuple] = {entry_key(e): (a.shape, a.dtype.name) for e, a in zip(fn.stages[0].grad_inputs, values)}
        for st in fn.stages:
            if st.index > 0:
                prev = fn.stages[st.index - 1].outputs
                known.update({entry_key(p): known[entry_key(e)] for p, e in zip(st.grad_inputs, prev)})
            g = Graph.create([e for t in fn.stages[:st.index + 1] for e in t.outputs])
            shapes, dtypes = [None] * g.num_entries, [None] * g.num_entries
            for n in g.nodes:
                for i in range(n.num_outputs()):
                    k = (id(n), i)
                    if k not in known and n.op is None:
                        v = initial_value(n)
                        if v is not None:
                            known[k] = (v.shape, v.dtype.name)
                    if k in known:
                        shapes[g.entry_id(n, i)], dtypes[g.entry_id(n, i)] = known[k]
            g = infer_shapes(g, shapes, dtypes)
            for n in g.nodes:
                for i in range(n.num_outputs()):
                    eid = g.entry_id(n, i)
                    known[(id(n), i)] = (tuple(g.attrs["shape"][eid]), g.attrs["dtype"][eid])
        return known

    def _placeholder(self, k: Key, copy_known: dict) -> Entry:
        shape, dtype = self.known[k]
        node = Node(get("placeholder"), f"saved_{k[0]:x}_{k[1]}", {"dtype": dtype, "shape": attr_str(list(shape))})
        copy_known[(id(node), 0)] = (shape, dtype)
        return Entry(node, 0, 0)

    def _copy(self, n: Node, feeds: dict, copy_known: dict) -> None:
        inputs = [self._copied_entry(entry_key(e), feeds, e) for e in n.inputs]
        deps = [self.copies[id(d)] for d in n.control_deps if id(d) in self.copies
                and self.fn.stage_of.get(id(d)) == self.fn.stage_of[id(n)]]
        forward = self.copies.get(id(n.forward)) if n.forward is not None else None
        c = Node(private_modules(n.op, self.fn.private_ops), n.name, dict(n.attrs), inputs, deps, forward=forward)
        self.copies[id(n)] = c
        for i in range(n.num_outputs()):
            copy_known[(id(c), i)] = self.known[(id(n), i)]

    def _copied_entry(self, k: Key, feeds: dict, e: Optional[Entry]) -> Entry:
        """The stage graph's entry for k: its placeholder, its node's copy, or (a variable
        read from the function's session) e itself."""
        if k in feeds:
            return feeds[k]
        if k[0] in self.copies:
            return Entry(self.copies[k[0]], k[1], 0)
        return e

    def chain(self) -> "Chain":
        """A chain no closure holds (a new one when every chain is held)."""
        chain = next((c for c in self._chains if c.holds == 0), None)
        if chain is None:
            chain = Chain(self)
            self._chains.append(chain)
        chain.hold()
        return chain


class Chain:
    """One executor per stage, built on first use, sharing one table of nn modules."""

    def __init__(self, plan: SignaturePlan) -> None:
        self.plan = plan
        self.holds = 0
        self.modules: dict = {}
        self.executors: dict[int, Optional[StageExecutor]] = {}

    def executor(self, s: int) -> Optional[StageExecutor]:
        if s not in self.executors:
            fetches = self.plan.fetches[s]
            fn = self.plan.fn
            self.executors[s] = StageExecutor(fn.session, fetches, self.plan.copy_known, self.modules) if fetches else None
        return self.executors[s]

    def prepare(self) -> None:
        """Every stage's executor, planned."""
        for s in range(len(self.plan.fetches)):
            ex = self.executor(s)
            if ex is not None:
                ex.prepare()

    def hold(self) -> None:
        self.holds += 1

    def release(self) -> None:
        self.holds -= 1


def private_modules(op: Op, cache: dict[str, Op]) -> Op:
    """The op, or for a lua_module (whose factory returns one shared module) a copy whose
    factory clones it, so that each chain has its own module state (cache: by op name)."""
    c = op.compute
    if not isinstance(c, NNCompute) or isinstance(c.source, str):
        return op
    if op.name not in cache:
        cloning = bridge().call(closures_module().cloning, c.source)
        cache[op.name] = replace(op, compute=replace(c, source=cloning))
    return cache[op.name]
