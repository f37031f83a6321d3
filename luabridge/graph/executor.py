"""The executor: a planned graph turned into a list of closures (Lua compute closures, nn
forward/backward closures, Python calls, feed copies) run by one Lua loop."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional, Protocol

import numpy as np

from ..core.errors import LuaError
from ..core.runtime import bridge
from .fusion_ir import as_lists, evaluate
from .graph import Graph
from .ops.init import dtype_name
from .passes.fuse import fuse
from .passes.infer import infer_shapes
from .passes.order_mutation import build_graph
from .passes.plan_memory import EMPTY, EXTERNAL, plan_memory
from .registry import LuaCompute, NNCompute, PythonCompute
from .symbol import Entry, Node


class SessionState(Protocol):
    """What an executor reads of the session.Session owning it (session.py builds executors, so
    this module names it by what it reads): the device and the variables' states."""
    device: Any
    _states: Any


class GraphError(LuaError):
    """An op failed while running: the message names the op and node."""


def lua_sizes(shape: tuple) -> tuple:
    return shape if shape else (1,)  # torch7 has no 0-dim tensors: scalars are 1-element


def _feed_signature(feeds: list[np.ndarray]) -> tuple:
    return tuple((a.shape, a.dtype.str) for a in feeds)


@dataclass
class _Plan:
    signature: tuple     # feeds' shapes and types, and the variables' (see Executor._signature)
    store_generation: int  # the variable store's generation the signature was last checked at
    graph: Graph
    tensors: list        # Lua tensor by entry id
    views: list          # numpy view by entry id
    run: Any             # the Lua run function
    where: Any           # Lua function: the step running (0 when none)
    labels: list         # step -> (kind, node)
    arrays: list         # the numpy buffers by storage id


class Executor:
    """Runs the graph of some fetched entries in a session; rebuilt when shapes change."""

    def __init__(self, session: SessionState, fetches: list[Entry], poison: bool = False) -> None:
        self.session = session
        self.device = session.device
        self.fetches = list(fetches)
        self.poison = poison
        self.graph = build_graph(self.fetches)
        self.placeholders = [n for n in self.graph.nodes if n.op is not None and n.op.name == "placeholder"]
        self.feed_dtypes = [np.dtype(dtype_name(p.attrs)) for p in self.placeholders]
        self.variables = [n for n in self.graph.nodes if n.op is None]
        self.read_vars, self.assigned_vars = self._variable_uses()
        self.plan: Optional[_Plan] = None
        self.pool: dict[tuple, list[np.ndarray]] = {}
        self.builds = 0
        self._feeds: list[np.ndarray] = []
        self._py_error: Optional[BaseException] = None

    def _variable_uses(self) -> tuple[list[Node], list[Node]]:
        """Variables read before this graph writes them (they must be initialised) and variables
        written (mutated inputs). A use of a version at least as new as the graph's first
        mutation of the variable reads the value written here."""
        uses: list[tuple[Node, int, bool]] = [(e.node, e.version, False) for e in self.fetches if e.node.op is None]
        for n in self.graph.nodes:
            if n.op is None:
                continue
            mutated = set(n.op.mutate_inputs)
            uses += [(e.node, e.version, i in mutated) for i, e in enumerate(n.inputs) if e.node.op is None]
        first_write: dict[int, int] = {}
        for v, ver, mut in uses:
            if mut:
                first_write[id(v)] = min(ver, first_write.get(id(v), ver))
        read = {id(v) for v, ver, mut in uses if not mut and ver < first_write.get(id(v), ver + 1)}
        return ([v for v in self.variables if id(v) in read],
                [v for v in self.variables if id(v) in first_write])

    # ---- running ----
    def run(self, feed: dict[Node, np.ndarray]) -> list[Optional[np.ndarray]]:
        feeds = [self._feed_array(p, dtype, feed) for p, dtype in zip(self.placeholders, self.feed_dtypes)]
        states = self.session._states
        plan = self.plan
        if plan is None or plan.store_generation != states.generation or plan.signature[0] != _feed_signature(feeds):
            # variables never lose their value: checked when the plan was made, they still have it
            for v in self.read_vars:
                states.ensure_initialised(v)
            # the variables' part of the signature is only recomputed when some variable changed
            if plan is None or plan.signature != self._signature(feeds):
                self._build(feeds)
            plan = self.plan
            plan.store_generation = states.generation
        self._feeds = feeds
        b = bridge()
        try:
            b.call(plan.run)
        except LuaError as e:
            raise self._op_error(plan, e) from None
        finally:
            self._feeds = []
        return [self._fetch(plan, e) for e in self.fetches]

    @staticmethod
    def _feed_array(p: Node, dtype: np.dtype, feed: dict) -> np.ndarray:
        if p not in feed:
            raise KeyError(f"missing feed for placeholder {p.name!r}")
        return np.ascontiguousarray(feed[p], dtype=dtype)

    def _signature(self, feeds: list[np.ndarray]) -> tuple:
        states = self.session._states
        return (_feed_signature(feeds), tuple(states.signature(v.name) for v in self.variables))

    def _fetch(self, plan: _Plan, e: Entry) -> Optional[np.ndarray]:
        if e.node.op is not None and e.node.op.name == "_nop":
            return None
        eid = plan.graph.entry_id(e)
        to_host = self.device.to_host
        if e.node.op is None:
            return np.array(to_host(self.session._states[e.node.name].array))
        shape = plan.graph.attrs["shape"][eid]
        return np.array(to_host(plan.views[eid].reshape(shape)))

    def _op_error(self, plan: _Plan, e: LuaError) -> Exception:
        step = int(plan.where() or 0)
        py, self._py_error = self._py_error, None
        if not step:
            return e
        kind, node = plan.labels[step - 1]
        what = "feeding placeholder" if kind == "feed" else f"op {node.op.name!r} (node {node.name!r})"
        msg = f"{what} failed: {type(py).__name__}: {py}" if py is not None else f"{what} failed: {e.message}"
        err = GraphError(msg, e.traceback)
        err.node = node
        return err

    # ---- building ----
    def _build(self, feeds: list[np.ndarray]) -> None:
        self.builds += 1
        g = self.graph
        states = self.session._states
        shapes: list = [None] * g.num_entries
        dtypes: list = [None] * g.num_entries
        for p, a in zip(self.placeholders, feeds):
            shapes[g.entry_id(p)], dtypes[g.entry_id(p)] = a.shape, a.dtype.name
        for v in self.variables:
            st = states.get(v.name)
            if st is not None and st.initialised and (v in self.read_vars or v not in self.assigned_vars):
                shapes[g.entry_id(v)], dtypes[g.entry_id(v)] = st.array.shape, st.array.dtype.name
        g = self._infer(g, shapes, dtypes)
        for v in self.assigned_vars:
            eid = g.entry_id(v)
            states.allocate(v.name, g.attrs["shape"][eid], g.attrs["dtype"][eid])
        if self.device.fusion:
            g = fuse(g, self.device.name)
        g = plan_memory(g)
        if self.plan is not None:
            self._release(self.plan)
        arrays, tensors, views, regions = self._buffers(g)
        steps, labels = self._closures(g, tensors, views, regions)
        run, where = bridge().call(closures_module().runner, bridge().lua.table_from(steps))
        self.plan = _Plan(self._signature(feeds), self.session._states.generation, g, tensors, views, run,
                          where, labels, arrays)

    def _infer(self, g: Graph, shapes: list, dtypes: list) -> Graph:
        """Every entry's shape and type from those known (the feeds' and variables')."""
        return infer_shapes(g, shapes, dtypes)

    def _release(self, plan: _Plan) -> None:
        """The old plan's buffers go back to the pool for the next plan."""
        for arr in plan.arrays:
            self.pool.setdefault((arr.dtype.str,), []).append(arr)
        self.plan = None

    def _take(self, n: int, dtype: np.dtype) -> Any:
        free = self.pool.get((dtype.str,), [])
        fits = [a for a in free if n <= a.size <= 2 * n + 64]
        if fits:
            a = min(fits, key=lambda a: a.size)
            free.remove(a)
            return a
        return self.device.zeros(max(n, 1), dtype)

    def _buffers(self, g: Graph) -> tuple[list, list, list, list]:
        """One arena per element type; every planned entry is a view at its chain's offset.
        Returns (arenas, Lua tensors by entry, views by entry, Lua region tensors by chain)."""
        b = bridge()
        closures = closures_module()
        kinds = sorted(g.attrs["arena_elements"])
        arrays = [self._take(g.attrs["arena_elements"][k], np.dtype(k)) for k in kinds]
        flats = {k: self.device.share(a) for k, a in zip(kinds, arrays)}
        arena = dict(zip(kinds, arrays))
        offsets, stypes = g.attrs["storage_offset"], g.attrs["storage_dtype"]
        tensors: list = [None] * g.num_entries
        views: list = [None] * g.num_entries
        states = self.session._states
        for eid, (sid, shape, dt) in enumerate(zip(g.attrs["storage_id"], g.attrs["shape"], g.attrs["dtype"])):
            if sid == EXTERNAL:
                st = states[g.entry_of(eid)[0].name]
                tensors[eid], views[eid] = st.tensor, st.array
                continue
            lshape = lua_sizes(shape)
            if sid == EMPTY:
                arr = self.device.zeros(lshape, dt)
                tensors[eid], views[eid] = self.device.share(arr), arr
                continue
            n, off = int(np.prod(lshape)), offsets[sid]
            views[eid] = arena[dt][off:off + n].reshape(lshape)
            tensors[eid] = b.call(closures.entry, flats[dt], b.lua.table_from(list(lshape)), off)
        regions = [b.call(closures.entry, flats[t], b.lua.table_from([-(-nb // np.dtype(t).itemsize)]), off)
                   for nb, t, off in zip(g.attrs["storage_bytes"], stypes, offsets)] if self.poison else []
        return arrays, tensors, views, regions

    def _closures(self, g: Graph, tensors: list, views: list, regions: list) -> tuple[list, list]:
        b = bridge()
        lua = b.lua
        closures = closures_module()
        modules: dict[int, tuple] = {}
        steps: list = []
        labels: list = []
        frees = g.attrs["frees_after"]
        poison_dtypes = {"float32", "float64", "float16"}
        for nid, node in enumerate(g.nodes):
            if node.op is None:
                continue
            ins = [tensors[i] for i in g.input_eids(node)]
            outs = [tensors[i] for i in g.output_eids(node)]
            try:
                step = self._step(g, node, ins, outs, views, modules)
            except (LuaError, ValueError, KeyError, TypeError) as e:
                err = GraphError(f"building op {node.op.name!r} (node {node.name!r}) failed: "
                                 f"{getattr(e, 'message', None) or e}", getattr(e, "traceback", ""))
                err.node = node
                raise err from None
            if step is not None:
                steps.append(step)
                labels.append(("feed" if node.op.name == "placeholder" else "op", node))
            if self.poison and nid in frees:
                ts = [regions[s] for s in frees[nid] if g.attrs["storage_dtype"][s] in poison_dtypes]
                if ts:
                    steps.append(b.call(closures.poisoner, lua.table_from(ts)))
                    labels.append(("op", node))
        return steps, labels

    def _step(self, g: Graph, node: Node, ins: list, outs: list, views: list, modules: dict) -> Any:
        b = bridge()
        lua = b.lua
        closures = closures_module()
        op = node.op
        if op.name == "placeholder":
            k = self.placeholders.index(node)
            view = views[g.entry_id(node)]
            shape = g.attrs["shape"][g.entry_id(node)]
            upload = self.device.upload
            return lambda: upload(view.reshape(shape), self._feeds[k])
        if op.name == "_fused":
            return self._fused_step(g, node, ins, outs, views)
        if op.name == "_backward":
            m, W, gW, spec = modules[id(node.forward)]
            return b.call(closures.nnBackward, m, W, gW, self._spec(node, spec), lua.table_from(ins),
                          lua.table_from(outs))
        c = op.compute
        kwarg = lua.table_from(dict(node.attrs))
        if isinstance(c, LuaCompute):
            return b.call(b.call(closures.factory, c.source), lua.table_from(ins), lua.table_from(outs), kwarg)
        if isinstance(c, NNCompute):
            fac = b.call(closures.factory, c.source) if isinstance(c.source, str) else c.source
            ishape = lua.table_from([lua.table_from(list(g.attrs["shape"][i])) for i in g.input_eids(node)])
            m = b.call(fac, ishape, kwarg)
            if m is None:
                raise ValueError(f"op {op.name!r} (node {node.name!r}): its module factory returned nothing")
            typename = self.device.lua_type(g.attrs["dtype"][g.input_eids(node)[0]])
            m, W, gW = b.call(closures.prepare, m, typename)
            spec = {"criterion": c.criterion, "states": lua.table_from(list(c.states))}
            modules[id(node)] = (m, W, gW, spec)
            return b.call(closures.nnForward, m, W, lua.table_from(spec), lua.table_from(ins), lua.table_from(outs))
        if isinstance(c, PythonCompute):
            in_v = [views[i].reshape(g.attrs["shape"][i]) for i in g.input_eids(node)]
            out_v = [views[i].reshape(g.attrs["shape"][i]) for i in g.output_eids(node)]
            return self._python_step(c.fn, in_v, out_v, dict(node.attrs))
        if op.name == "_nop":
            return None
        raise ValueError(f"op {op.name!r} (node {node.name!r}) has no compute")

    def _fused_step(self, g: Graph, node: Node, ins: list, outs: list, views: list) -> Any:
        """One generated kernel for a fused group: a LuaJIT loop (lua/luabridge/graph/fusion_ir.lua) on
        the CPU, the CUDA provider's kernel (providers/torch_cuda/fuse.py) on CUDA."""
        group = node.attrs["group"]
        if self.device.name == "cpu":
            b = bridge()
            exprs = b.lua.table_from([as_lists(e) for e in group.exprs], recursive=True)
            return b.call(b.module("luabridge.graph.fusion_ir").closure, exprs, b.lua.table_from(ins),
                          b.lua.table_from(outs), node.attrs["form"] == "blocked")
        kernel = self.device.fused_kernel(group, evaluate)
        in_v = [views[i] for i in g.input_eids(node)]
        out_v = [views[i] for i in g.output_eids(node)]
        return self._python_step(lambda i, o, _: kernel(*i, *o), in_v, out_v, {})

    def _spec(self, node: Node, fwd_spec: dict) -> Any:
        from .internal import backward_layout
        n_fwd, need_in, need_out, _, _ = backward_layout(node.attrs)
        spec = dict(fwd_spec, needInputs=need_in, needOutputs=need_out, forwardInputs=n_fwd)
        return bridge().lua.table_from(spec)

    def _python_step(self, fn: Callable, ins: list, outs: list, attrs: dict) -> Callable:
        def step() -> None:
            try:
                fn(ins, outs, attrs)
            except BaseException as e:
                self._py_error = e
                raise
        return step


def closures_module() -> Any:
    b = bridge()
    b.module("nn")   # the closures drive nn modules
    return b.module("luabridge.graph.executor")

