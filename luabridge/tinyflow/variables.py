"""Variables and the graph-wide helpers of the front end (tf.Variable, initialize_all_variables,
group, gradients), apart from the package so that tf.train builds on them without importing it."""
from __future__ import annotations

from typing import Optional, Sequence, Union

from ..graph import symbol as _symbol
from ..graph.symbol import Group, Symbol, create

# the inits of Variable(init) since the last initialize_all_variables()
_all_variable_inits: list[Symbol] = []


def Variable(init: Optional[Symbol] = None, name: Optional[str] = None) -> Symbol:
    """A variable; `init` (a symbol) is assigned by the next initialize_all_variables()."""
    v = _symbol.Variable(_symbol.names.get(name, "variable"))
    if init is not None:
        if not isinstance(init, Symbol):
            raise TypeError("Variable: the initial value must be a Symbol (e.g. tf.zeros([2, 3]))")
        _all_variable_inits.append(create("assign", v, init))
    return v


def initialize_all_variables() -> Symbol:
    """A group of the assigns of every Variable init made since the last call."""
    global _all_variable_inits
    inits, _all_variable_inits = _all_variable_inits, []
    return group(*inits)


def group(*inputs: Union[Symbol, Sequence[Symbol]]) -> Symbol:
    """One op that runs all the inputs (fetching it gives None)."""
    deps = []
    for s in inputs:
        deps.extend(s if isinstance(s, (list, tuple)) else [s])
    g = create("_nop")
    g._add_control_deps(Group(deps))
    return g


def gradients(ys: Union[Symbol, Sequence[Symbol]], xs: Union[Symbol, Sequence[Symbol]],
              grad_ys: Optional[Sequence[Symbol]] = None) -> list[Symbol]:
    """The gradients of sum(ys) (weighted by grad_ys) with respect to each of xs."""
    from ..graph import gradients as _gradients
    return _gradients(ys, xs, grad_ys)
