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
from typing import Any, Optional, Sequence, Union

import numpy as np

from .api import initial_value
from .ops.init import dtype_name
from .passes.gradient import gradient
from .registry import Op, parse_tuple
from .session import Session
from .staging import Chain, Key, SignaturePlan, Stage, entry_key, is_leaf_kind
from .symbol import Entry, Node, Symbol, Variable, entry_name, topo_nodes

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


class StagedFunction:
    """A graph compiled into stages; call it with one array per input."""

    def __init__(self, outputs: list[Entry], inputs: list[Entry], stages: int) -> None:
        for i, e in enumerate(inputs):
            if not is_leaf_kind(e.node):
                raise ValueError(f"compile: input {i} ({entry_name(e)}) is not a placeholder or a variable")
        self.num_stages = stages
        self.inputs = inputs
        self.stages = self._differentiate(outputs, inputs, stages)
        nodes = topo_nodes([e for st in self.stages for e in st.outputs])
        self._check_nodes(nodes)
        self._partition(nodes)
        self.session = Session()   # the variables no input names (a lua_module's weights)
        self._plans: OrderedDict[tuple, SignaturePlan] = OrderedDict()
        self.private_ops: dict[str, Op] = {}   # lua_module ops whose factory clones the module
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
    def _differentiate(self, outputs: list[Entry], inputs: list[Entry], stages: int) -> list[Stage]:
        levels = [Stage(0, list(inputs), list(outputs))]
        leaves = list(inputs)
        for s in range(1, stages + 1):
            prev = levels[-1].outputs
            seeds = [Variable(f"{entry_name(e)}_grad{s}").outputs[0] for e in prev]
            try:
                grads = gradient(prev, leaves, seeds)
            except ValueError as e:
                raise ValueError(f"compile(..., stages={stages}): stage {s}: {e}") from None
            levels.append(Stage(s, seeds, grads))
            leaves = leaves + seeds
        return levels

    def _check_nodes(self, nodes: list[Node]) -> None:
        """Every placeholder is an input; no op writes a variable (a compiled function is pure)."""
        given = {id(e.node) for e in self.inputs}
        for n in nodes:
            if n.op is not None and n.op.name == "placeholder" and id(n) not in given:
                raise ValueError(f"compile: placeholder {n.name!r} is read but is not among the inputs")
            if n.op is not None and n.op.mutate_inputs:
                raise ValueError(f"compile: op {n.op.name!r} (node {n.name!r}) writes a variable; "
                                 "a compiled function cannot")

    def _partition(self, nodes: list[Node]) -> None:
        """Each node goes to the first stage that needs it (a result of that stage or an input
        of a node there); what crosses stages is saved by one stage and read by later ones."""
        self.leaf_stage = {entry_key(e): st.index for st in self.stages for e in st.grad_inputs}
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
                         if not is_leaf_kind(n) and id(n) in need}
        for n in nodes:
            if id(n) in self.stage_of:
                self.stages[self.stage_of[id(n)]].nodes.append(n)
        for st in self.stages:
            here = {id(n) for n in st.nodes}
            reads: dict = {}
            for n in st.nodes:
                for e in n.inputs:
                    if id(e.node) not in here and self._fed(e):
                        reads[entry_key(e)] = e
            st.reads = list(reads)
            st.direct = [entry_key(e) for e in st.outputs if id(e.node) not in here and self._fed(e)]
        for st in self.stages:
            later = {k for t in self.stages[st.index + 1:] for k in t.reads + t.direct}
            st.saves = [k for k in dict.fromkeys(entry_key(Entry(n, i, 0)) for n in st.nodes
                                                 for i in range(n.num_outputs())) if k in later]
            st.keep = [k for k in dict.fromkeys(later) if self.available_at(k) <= st.index]

    def _fed(self, e: Entry) -> bool:
        """Whether a stage gets this entry as a feed (a variable no input names is read from
        the function's own session instead)."""
        return e.node.op is not None or entry_key(e) in self.leaf_stage

    def available_at(self, k: Key) -> int:
        return self.leaf_stage[k] if k in self.leaf_stage else self.stage_of[k[0]]

    # ---- running ----
    def __call__(self, *arrays: Any) -> tuple[list, Optional["StageClosure"]]:
        first = self.stages[0]
        if len(arrays) != len(first.grad_inputs):
            names = ", ".join(entry_name(e) for e in first.grad_inputs)
            raise ValueError(f"compiled function: takes {len(first.grad_inputs)} input(s) ({names}), "
                             f"got {len(arrays)}")
        values = [_input_array(e, a) for e, a in zip(first.grad_inputs, arrays)]
        plan = self._plan(values)
        chain = plan.chain()
        try:
            return _run(self, plan, chain, 0, {}, values)
        finally:
            chain.release()

    def _plan(self, values: list[np.ndarray]) -> SignaturePlan:
        sig = tuple((a.shape, a.dtype.str) for a in values)
        plan = self._plans.get(sig)
        if plan is None:
            plan = self._plans[sig] = SignaturePlan(self, values)
            while len(self._plans) > 8:
                self._plans.popitem(last=False)
        self._plans.move_to_end(sig)
        return plan


def _input_array(e: Entry, a: Any) -> np.ndarray:
    """A private copy of an input (placeholders: in their own type; variables: floats)."""
    a = np.asarray(a)
    if e.node.op is not None:
        return np.array(a, dtype=dtype_name(e.node.attrs))
    return np.array(a, dtype=a.dtype if a.dtype.kind == "f" else np.float32)


def _run(fn: StagedFunction, plan: SignaturePlan, chain: Chain, s: int, held: dict,
         fed: list[np.ndarray]) -> tuple[list, Optional["StageClosure"]]:
    """Runs stage s on the chain: the results and the closure of stage s + 1 (None past the last)."""
    st = fn.stages[s]
    values = dict(held)
    values.update(zip((entry_key(e) for e in st.grad_inputs), fed))
    ex = chain.executor(s)
    if ex is not None:
        feed = {node: values[k] for k, node in plan.feeds[s]}
        values.update(zip(plan.fetch_keys[s], ex.run(feed)))
    results = [np.array(values[entry_key(e)]) for e in st.outputs]
    if s == fn.num_stages:
        return results, None
    return results, StageClosure(fn, plan, chain, s + 1, {k: values[k] for k in st.keep})


class StageClosure:
    """Stage `stage` of a compiled function, holding the values it needs: call it once with
    one gradient (or None: zeros) per result of the stage before."""

    def __init__(self, fn: StagedFunction, plan: SignaturePlan, chain: Chain, stage: int,
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
        result = _run(self.fn, self.plan, self.chain, self.stage, self._held, fed)
        if not retain_graph:
            self._held = None
            self._release()
        return result

    def _grad_array(self, e: Entry, g: Any, i: int) -> np.ndarray:
        shape, dtype = self.plan.known[entry_key(e)]
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


