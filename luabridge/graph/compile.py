"""Staged closures, after PyTorch 0.3's JIT autograd closures: `compile(outputs, inputs, stages)`
gives a function whose call returns its outputs and a closure for the next stage, which holds
the values that stage needs. Stage k + 1 is the gradient graph of stage k (its results are the
gradients of the original inputs followed by those of every earlier stage's gradient inputs).

At compile time the gradient graphs of every stage are made and each node goes to the first
stage that needs it; values crossing stages are saved by the stage that computes them (fetched
out of its planned buffers) and fed to the later ones. Per input signature (shapes, types) the
stage graphs are copied with placeholders for the saved values and planned by the executor;
a chain of executors (one per stage, sharing their nn modules) serves one forward call and its
closures at a time, so two forward calls never share state."""
from __future__ import annotations

import weakref
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from typing import Any, Optional, Sequence, Union

import numpy as np

from ..runtime import bridge
from .api import initial_value
from .executor import Executor, _closures_module
from .graph import Graph
from .ops.init import dtype_name
from .passes.gradient import gradient
from .passes.infer import infer_shapes
from .registry import LuaModule, Op, attr_str, get, parse_tuple
from .session import Session
from .symbol import Entry, Node, Symbol, Variable, entry_name, topo_nodes

Key = tuple  # (id(node), output index) of an entry of the compiled graph
Symbols = Union[Symbol, Sequence[Symbol]]


class StageError(RuntimeError):
    """A stage closure called a second time, or a stage past those compiled."""


def compile(outputs: Symbols, inputs: Symbols, stages: int = 1) -> "StagedFunction":
    """f with `outs, back = f(*arrays)`, `grads, back2 = back(*output_grads)`, ...: stages
    gradient stages after the forward one (the last returns None for its next)."""
    if isinstance(stages, bool) or not isinstance(stages, int) or stages < 0:
        raise ValueError(f"compile: stages must be an int >= 0, got {stages!r}")
    return StagedFunction(_entries(outputs, "outputs"), _entries(inputs, "inputs"), stages)


def _entries(s: Symbols, what: str) -> list[Entry]:
    symbols = [s] if isinstance(s, Symbol) else list(s)
    for sym in symbols:
        if not isinstance(sym, Symbol):
            raise TypeError(f"compile: {what} must be symbols, got {type(sym).__name__}")
    return [e for sym in symbols for e in sym.outputs]


def _key(e: Entry) -> Key:
    return id(e.node), e.index


def _is_leaf_kind(node: Node) -> bool:
    return node.op is None or node.op.name == "placeholder"


@dataclass
class _Stage:
    index: int
    grad_inputs: list      # list[Entry]: what this stage is called with (stage 0: the inputs)
    outputs: list          # list[Entry]: its results
    nodes: list = field(default_factory=list)      # the nodes it computes, in order
    reads: list = field(default_factory=list)      # keys it reads from elsewhere (fed)
    direct: list = field(default_factory=list)     # keys of results it does not compute
    saves: list = field(default_factory=list)      # keys it computes that later stages read
    keep: list = field(default_factory=list)       # keys the next closure holds


class StagedFunction:
    """A graph compiled into stages; call it with one array per input."""

    def __init__(self, outputs: list[Entry], inputs: list[Entry], stages: int) -> None:
        for i, e in enumerate(inputs):
            if not _is_leaf_kind(e.node):
                raise ValueError(f"compile: input {i} ({entry_name(e)}) is not a placeholder or a variable")
        self.num_stages = stages
        self.inputs = inputs
        self.stages = self._differentiate(outputs, inputs, stages)
        nodes = topo_nodes([e for st in self.stages for e in st.outputs])
        self._check_placeholders(nodes)
        self._partition(nodes)
        self.session = Session()   # the variables no input names (a lua_module's weights)
        self._plans: OrderedDict[tuple, _SignaturePlan] = OrderedDict()
        static = self._static_inputs()
        if static is not None:
            chain = self._plan(static).chain()
            chain.prepare()
            chain.release()

    def _static_inputs(self) -> Optional[list[np.ndarray]]:
        """Zeros of every input's shape when all are known now (placeholders given a shape,
        variables with an initial value), so that the stages are planned at compile time."""
        arrays = []
        for e in self.inputs:
            if e.node.op is None:
                value = initial_value(e.node)
                if value is None:
                    return None
                arrays.append(np.zeros_like(value))
            else:
                shape = parse_tuple(e.node.attrs.get("shape"))
                if not shape:
                    return None
                arrays.append(np.zeros(shape, dtype_name(e.node.attrs)))
        return arrays

    # ---- compile time ----
    def _differentiate(self, outputs: list[Entry], inputs: list[Entry], stages: int) -> list[_Stage]:
        levels = [_Stage(0, list(inputs), list(outputs))]
        leaves = list(inputs)
        for s in range(1, stages + 1):
            prev = levels[-1].outputs
            seeds = [Variable(f"{entry_name(e)}_grad{s}").outputs[0] for e in prev]
            try:
                grads = gradient(prev, leaves, seeds)
            except ValueError as e:
                raise ValueError(f"compile(..., stages={stages}): stage {s}: {e}") from None
            levels.append(_Stage(s, seeds, grads))
            leaves = leaves + seeds
        return levels

    def _check_placeholders(self, nodes: list[Node]) -> None:
        given = {id(e.node) for e in self.inputs}
        for n in nodes:
            if n.op is not None and n.op.name == "placeholder" and id(n) not in given:
                raise ValueError(f"compile: placeholder {n.name!r} is read but is not among the inputs")

    def _partition(self, nodes: list[Node]) -> None:
        """Each node goes to the first stage that needs it (a result of that stage or an input
        of a node there); what crosses stages is saved by one stage and read by later ones."""
        self.leaf_stage = {_key(e): st.index for st in self.stages for e in st.grad_inputs}
        need: dict[int, int] = {}
        for st in reversed(self.stages):
            for e in st.outputs:
                need[id(e.node)] = min(need.get(id(e.node), st.index), st.index)
        for n in reversed(nodes):
            if id(n) not in need:
                continue
            for p in [e.node for e in n.inputs] + list(n.control_deps):
                need[id(p)] = min(need.get(id(p), need[id(n)]), need[id(n)])
        self.stage_of = {id(n): need[id(n)] for n in nodes
                         if not _is_leaf_kind(n) and id(n) in need}
        for n in nodes:
            if id(n) in self.stage_of:
                self.stages[self.stage_of[id(n)]].nodes.append(n)
        for st in self.stages:
            here = {id(n) for n in st.nodes}
            reads: dict = {}
            for n in st.nodes:
                for e in n.inputs:
                    if id(e.node) not in here and self._fed(e):
                        reads[_key(e)] = e
            st.reads = list(reads)
            st.direct = [_key(e) for e in st.outputs if id(e.node) not in here and self._fed(e)]
        for st in self.stages:
            later = {k for t in self.stages[st.index + 1:] for k in t.reads + t.direct}
            st.saves = [k for k in dict.fromkeys(_key(Entry(n, i, 0)) for n in st.nodes
                                                 for i in range(n.num_outputs())) if k in later]
            st.keep = [k for k in dict.fromkeys(later) if self.available_at(k) <= st.index]

    def _fed(self, e: Entry) -> bool:
        """Whether a stage gets this entry as a feed (a variable no input names is read from
        the function's own session instead)."""
        return e.node.op is not None or _key(e) in self.leaf_stage

    def available_at(self, k: Key) -> int:
        return self.leaf_stage[k] if k in self.leaf_stage else self.stage_of[k[0]]

    # ---- running ----
    def __call__(self, *arrays: Any) -> tuple[list, Optional["StageClosure"]]:
        first = self.stages[0]
        if len(arrays) != len(first.grad_inputs):
            names = ", ".join(entry_name(e) for e in first.grad_inputs)
            raise ValueError(f"compiled function: takes {len(first.grad_inputs)} input(s) ({names}), "
                             f"got {len(arrays)}")
        values = [_input_array(e, a, i) for i, (e, a) in enumerate(zip(first.grad_inputs, arrays))]
        plan = self._plan(values)
        chain = plan.chain()
        try:
            return _run(self, plan, chain, 0, {}, values)
        finally:
            chain.release()

    def _plan(self, values: list[np.ndarray]) -> "_SignaturePlan":
        sig = tuple((a.shape, a.dtype.str) for a in values)
        plan = self._plans.get(sig)
        if plan is None:
            plan = self._plans[sig] = _SignaturePlan(self, values)
            while len(self._plans) > 8:
                self._plans.popitem(last=False)
        self._plans.move_to_end(sig)
        return plan


def _input_array(e: Entry, a: Any, i: int) -> np.ndarray:
    """A private copy of an input (placeholders: in their own type; variables: floats)."""
    a = np.asarray(a)
    if e.node.op is not None:
        return np.array(a, dtype=dtype_name(e.node.attrs))
    return np.array(a, dtype=a.dtype if a.dtype.kind == "f" else np.float32)


def _run(fn: StagedFunction, plan: "_SignaturePlan", chain: "_Chain", s: int, held: dict,
         fed: list[np.ndarray]) -> tuple[list, Optional["StageClosure"]]:
    """Runs stage s on the chain: the results and the closure of stage s + 1 (None past the last)."""
    st = fn.stages[s]
    values = dict(held)
    values.update(zip((_key(e) for e in st.grad_inputs), fed))
    ex = chain.executor(s)
    if ex is not None:
        feed = {node: values[k] for k, node in plan.feeds[s]}
        values.update(zip(plan.fetch_keys[s], ex.run(feed)))
    results = [np.array(values[_key(e)]) for e in st.outputs]
    if s == fn.num_stages:
        return results, None
    return results, StageClosure(fn, plan, chain, s + 1, {k: values[k] for k in st.keep})


class StageClosure:
    """Stage `stage` of a compiled function, holding the values it needs: call it once with
    one gradient (or None: zeros) per result of the stage before."""

    def __init__(self, fn: StagedFunction, plan: "_SignaturePlan", chain: "_Chain", stage: int,
                 held: dict) -> None:
        self.fn, self.plan, self.chain, self.stage = fn, plan, chain, stage
        self._held: Optional[dict] = held
        chain.hold()
        self._release = weakref.finalize(self, chain.release)

    def __call__(self, *grads: Any, retain_graph: bool = False) -> tuple[list, Optional["StageClosure"]]:
        if self._held is None:
            raise StageError(f"stage {self.stage} closure called twice (compiled for {self.fn.num_stages} "
                             "stages; retain_graph=True keeps a closure for another call)")
        st = self.fn.stages[self.stage]
        if len(grads) != len(st.grad_inputs):
            raise ValueError(f"stage {self.stage} closure: takes {len(st.grad_inputs)} gradient(s), one per "
                             f"result of stage {self.stage - 1}, got {len(grads)}")
        fed = [self._grad_array(e, g, i) for i, (e, g) in enumerate(zip(st.grad_inputs, grads))]
        held = self._held
        if not retain_graph:
            self._held = None
        try:
            return _run(self.fn, self.plan, self.chain, self.stage, held, fed)
        finally:
            if not retain_graph:
                self._release()

    def _grad_array(self, e: Entry, g: Any, i: int) -> np.ndarray:
        shape, dtype = self.plan.known[_key(e)]
        if g is None:
            return np.zeros(shape, dtype)
        g = np.asarray(g)
        if g.shape != shape:
            if g.size != int(np.prod(shape)):
                raise ValueError(f"stage {self.stage} closure: gradient {i} has shape {g.shape}, "
                                 f"the result it belongs to {shape}")
            g = g.reshape(shape)
        return np.array(g, dtype=dtype)

    def __repr__(self) -> str:
        return f"<StageClosure stage {self.stage} of {self.fn.num_stages}>"


# ---- per input signature ----

class _StageExecutor(Executor):
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


class _SignaturePlan:
    """The stage graphs of one input signature: every entry's shape and type, and per stage a
    copy of its nodes reading placeholders (the fed values) and fetching its results and saves."""

    def __init__(self, fn: StagedFunction, values: list[np.ndarray]) -> None:
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
            results = {_key(e): e for e in st.outputs if _key(e) not in st.direct}
            keys = list(dict.fromkeys(list(results) + st.saves))
            self.fetch_keys.append(keys)
            self.fetches.append([self._copied_entry(k, feeds, results.get(k)) for k in keys])
            self.feeds.append([(k, feeds[k].node) for k in st.reads])
        self.copy_known = {**self.known, **copy_known}   # variables appear as themselves
        self._chains: list[_Chain] = []

    def _infer(self, values: list[np.ndarray]) -> dict[Key, tuple]:
        """Shapes and types of every entry, stage by stage (a stage's gradient inputs have the
        shapes and types of the results they belong to)."""
        fn = self.fn
        known: dict[Key, tuple] = {_key(e): (a.shape, a.dtype.name) for e, a in zip(fn.stages[0].grad_inputs, values)}
        for st in fn.stages:
            if st.index > 0:
                prev = fn.stages[st.index - 1].outputs
                known.update({_key(p): known[_key(e)] for p, e in zip(st.grad_inputs, prev)})
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
        inputs = [self._copied_entry(_key(e), feeds, e) for e in n.inputs]
        deps = [self.copies[id(d)] for d in n.control_deps if id(d) in self.copies
                and self.fn.stage_of.get(id(d)) == self.fn.stage_of[id(n)]]
        forward = self.copies.get(id(n.forward)) if n.forward is not None else None
        c = Node(_private_modules(n.op), n.name, dict(n.attrs), inputs, deps, forward=forward)
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

    def chain(self) -> "_Chain":
        """A chain no closure holds (a new one when every chain is held)."""
        chain = next((c for c in self._chains if c.holds == 0), None)
        if chain is None:
            chain = _Chain(self)
            self._chains.append(chain)
        chain.hold()
        return chain


class _Chain:
    """One executor per stage, built on first use, sharing one table of nn modules."""

    def __init__(self, plan: _SignaturePlan) -> None:
        self.plan = plan
        self.holds = 0
        self.modules: dict = {}
        self.executors: dict[int, Optional[_StageExecutor]] = {}

    def executor(self, s: int) -> Optional[_StageExecutor]:
        if s not in self.executors:
            fetches = self.plan.fetches[s]
            fn = self.plan.fn
            self.executors[s] = _StageExecutor(fn.session, fetches, self.plan.copy_known, self.modules) if fetches else None
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


_PRIVATE: dict[str, Op] = {}


def _private_modules(op: Op) -> Op:
    """The op, or for a lua_module (whose factory returns one shared module) a copy whose
    factory clones it, so that each chain has its own module state."""
    c = op.compute
    if not isinstance(c, LuaModule) or isinstance(c.source, str):
        return op
    private = _PRIVATE.get(op.name)
    if private is None or private.compute.source is not c.source:
        cloning = bridge().call(_closures_module().cloning, c.source)
        private = _PRIVATE[op.name] = replace(op, compute=replace(c, source=cloning))
    return private
