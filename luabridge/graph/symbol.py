"""Symbols over nodes: the user-facing graph-building API (nnvm's model)."""
from __future__ import annotations

import itertools
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Iterator, NamedTuple, Optional, Union

from . import registry
from .registry import attr_str

if TYPE_CHECKING:
    from .registry import Op


@dataclass(eq=False)
class Node:
    """A graph node; op None makes it a variable. Identity semantics (eq=False)."""
    op: Optional["Op"]
    name: str
    attrs: dict = field(default_factory=dict)
    inputs: list = field(default_factory=list)          # list[Entry]
    control_deps: list = field(default_factory=list)    # list[Node]
    forward: Optional["Node"] = None   # a backward node's forward node (the `_backward` of an nn op)
    version: int = 0                   # variables: bumped by each op that mutates them

    @property
    def is_variable(self) -> bool:
        return self.op is None

    def num_outputs(self) -> int:
        return 1 if self.op is None else self.op.n_outputs(self.attrs)

    def __repr__(self) -> str:
        kind = "Variable" if self.op is None else self.op.name
        return f"<Node {kind} {self.name!r}>"


class Entry(NamedTuple):
    node: Node
    index: int
    version: int


class Symbol:
    """A list of output entries."""

    __array_ufunc__ = None  # numpy scalars and arrays defer to the reflected operators below

    def __init__(self, outputs: Iterable[Entry]) -> None:
        self.outputs: list[Entry] = list(outputs)

    # ---- structure ----
    def __len__(self) -> int:
        return len(self.outputs)

    def __iter__(self) -> Iterator["Symbol"]:
        return (Symbol([e]) for e in self.outputs)

    def __getitem__(self, i: Union[int, str]) -> "Symbol":
        if isinstance(i, str):
            names = self.list_output_names()
            if i not in names:
                raise KeyError(f"no output named {i!r} (outputs: {', '.join(names)})")
            i = names.index(i)
        return Symbol([self.outputs[i]])

    def list_input_variables(self) -> list["Symbol"]:
        return [Symbol([Entry(n, 0, n.version)]) for n in _topo_nodes(self.outputs) if n.op is None]

    def list_input_names(self) -> list[str]:
        return [n.name for n in _topo_nodes(self.outputs) if n.op is None]

    def list_output_names(self) -> list[str]:
        return [entry_name(e) for e in self.outputs]

    def get_internals(self) -> "Symbol":
        return Symbol([Entry(n, i, n.version if n.op is None else 0)
                       for n in _topo_nodes(self.outputs) for i in range(n.num_outputs())])

    def attr(self, key: str) -> Optional[str]:
        if len(self.outputs) != 1:
            raise ValueError("attr: only a single-output symbol has attributes")
        node = self.outputs[0].node
        return node.name if key == "name" else node.attrs.get(key)

    @property
    def name(self) -> Optional[str]:
        return self.outputs[0].node.name if len(self.outputs) == 1 else None

    def _add_control_deps(self, deps: "Symbol") -> None:
        for e in self.outputs:
            e.node.control_deps.extend(d.node for d in deps.outputs)

    def __repr__(self) -> str:
        return f"<Symbol {', '.join(self.list_output_names())}>"

    # ---- operators: each creates the op of nnvm's name ----
    def __add__(self, o: Any) -> "Symbol":
        return _binary("__add_symbol__", "__add_scalar__", self, o)

    __radd__ = __add__

    def __sub__(self, o: Any) -> "Symbol":
        return _binary("__sub_symbol__", "__sub_scalar__", self, o)

    def __rsub__(self, o: Any) -> "Symbol":
        return create("__rsub_scalar__", self, scalar=_scalar(o))

    def __mul__(self, o: Any) -> "Symbol":
        return _binary("__mul_symbol__", "__mul_scalar__", self, o)

    __rmul__ = __mul__

    def __truediv__(self, o: Any) -> "Symbol":
        return _binary("__div_symbol__", "__div_scalar__", self, o)

    def __rtruediv__(self, o: Any) -> "Symbol":
        return create("__rdiv_scalar__", self, scalar=_scalar(o))

    def __pow__(self, o: Any) -> "Symbol":
        return _binary("__pow_symbol__", "__pow_scalar__", self, o)

    def __rpow__(self, o: Any) -> "Symbol":
        return create("__rpow_scalar__", self, scalar=_scalar(o))

    def __neg__(self) -> "Symbol":
        return create("__mul_scalar__", self, scalar=_scalar(-1))

    __div__ = __truediv__
    __rdiv__ = __rtruediv__


def _scalar(o: Any) -> str:
    if isinstance(o, bool) or not isinstance(o, (int, float)):
        try:
            o = float(o)  # numpy scalars
        except (TypeError, ValueError):
            raise TypeError(f"graph operators take symbols or numbers, got {type(o).__name__}") from None
    return repr(float(o))


def _binary(sym_op: str, scalar_op: str, a: Symbol, b: Any) -> Symbol:
    if isinstance(b, Symbol):
        return create(sym_op, a, b)
    return create(scalar_op, a, scalar=_scalar(b))


def entry_name(e: Entry) -> str:
    n = e.node
    if n.op is None:
        return n.name
    return f"{n.name}_output" if n.num_outputs() == 1 else f"{n.name}_output{e.index}"


# ---- names ----
class NameManager:
    """Automatic names: the op's hint and a per-hint counter ("matmul0", "matmul1", ...)."""

    def __init__(self) -> None:
        self.counters: defaultdict[str, itertools.count] = defaultdict(itertools.count)

    def get(self, name: Optional[str], hint: str) -> str:
        return name if name is not None else f"{hint}{next(self.counters[hint])}"


names = NameManager()


# ---- constructors ----
def Variable(name: str, **attrs: Any) -> Symbol:
    """A variable node (its value lives in a session, by name)."""
    node = Node(None, name, {k: attr_str(v) for k, v in attrs.items()})
    return Symbol([Entry(node, 0, 0)])


def Group(symbols: Iterable[Symbol]) -> Symbol:
    """One symbol holding all the outputs of the given symbols."""
    return Symbol([e for s in symbols for e in _as_symbol(s).outputs])


def _as_symbol(s: Any) -> Symbol:
    if not isinstance(s, Symbol):
        raise TypeError(f"expected a Symbol, got {type(s).__name__}")
    return s


def create(op_name: str, *inputs: Symbol, name: Optional[str] = None, **attrs: Any) -> Symbol:
    """A node applying op `op_name` to the inputs. Symbol-valued keyword arguments are inputs by
    name; missing named inputs become variables "<node>_<arg>"; other keywords are attributes
    (stored as strings)."""
    op = registry.get(op_name)
    sym_kwargs = {k: v for k, v in attrs.items() if isinstance(v, Symbol)}
    str_attrs = {k: attr_str(v) for k, v in attrs.items() if k not in sym_kwargs and v is not None}
    name = names.get(name, op.hint or op.name.strip("_"))
    in_entries = [_single(s, op_name) for s in inputs]
    n_in = op.n_inputs(str_attrs)
    arg_names = op.list_input_names(str_attrs) if n_in else []
    unknown = set(sym_kwargs) - set(arg_names)
    if unknown:
        raise TypeError(f"{op_name}: unknown input(s) {sorted(unknown)} (inputs: {arg_names})")
    if len(in_entries) > n_in >= 0 and not _variadic(op):
        raise TypeError(f"{op_name}: takes {n_in} input(s), got {len(in_entries)}")
    for arg in arg_names[len(in_entries):n_in]:
        s = sym_kwargs.get(arg)
        in_entries.append(_single(s, op_name) if s is not None else Variable(f"{name}_{arg}").outputs[0])
    node = Node(op, name, str_attrs, in_entries)
    for i in op.mutate_inputs:
        target = in_entries[i].node
        target.version += 1
        in_entries[i] = Entry(target, in_entries[i].index, target.version)
    return Symbol([Entry(node, i, 0) for i in range(node.num_outputs())])


def _variadic(op: "Op") -> bool:
    return callable(op.num_inputs)


def _single(s: Any, op_name: str) -> Entry:
    s = _as_symbol(s)
    if len(s.outputs) != 1:
        raise ValueError(f"{op_name}: an input must have one output, got {len(s.outputs)}")
    return s.outputs[0]


# ---- traversal ----
def _topo_nodes(outputs: Iterable[Entry], extra: Optional[dict] = None) -> list[Node]:
    """Nodes reachable from the entries (inputs, control deps and `extra[id(node)]`, more
    predecessors), in topological order (depth first); a cycle is an error."""
    order: list[Node] = []
    state: dict[int, int] = {}  # 1: in progress, 2: done
    stack: list[tuple[Node, bool]] = [(e.node, False) for e in reversed(list(outputs))]
    while stack:
        node, done = stack.pop()
        if done:
            state[id(node)] = 2
            order.append(node)
            continue
        if id(node) in state:
            if state[id(node)] == 1:
                raise ValueError(f"the graph has a cycle through node {node.name!r}")
            continue
        state[id(node)] = 1
        stack.append((node, True))
        preds = [e.node for e in node.inputs] + list(node.control_deps)
        if extra:
            preds += extra.get(id(node), [])
        for p in reversed(preds):
            if state.get(id(p)) == 1:
                raise ValueError(f"the graph has a cycle through node {p.name!r}")
            if id(p) not in state:
                stack.append((p, False))
    return order


topo_nodes = _topo_nodes
