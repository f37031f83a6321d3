"""nngraph's `nn.gModule` as a `torch.fx.GraphModule`, and the small nngraph modules.

The gModule's forward nodes (a topological order, its input node first) become fx nodes: a
node with a module calls that module's conversion, a select node (what `node:split(n)` makes)
indexes the table it receives, and a node without a module passes its input on. A node with
several inputs hands its module a list of them, as nngraph hands it a table. The module takes
what the gModule takes: one input as is, several as one list (``gm([x, prev_c, prev_h])``);
it returns a list when the gModule has several outputs.
"""
from __future__ import annotations

import keyword
import operator
from typing import Any

import torch
import torch.fx


from ..core.proxy import LuaObject, wrap
from ..core.runtime import bridge
from ..core.runtime import luajit21 as lupa
from .convert import Context, converter, describe, is_module

Value = Any  # an fx.Node, or a list of Values: what a table-valued edge carries while tracing


def _select(graph: torch.fx.Graph, value: Value, index: int) -> Value:
    """Element `index` (0-based) of a table value: a list known while tracing is indexed here."""
    if isinstance(value, list):
        return value[index]
    return graph.call_function(operator.getitem, (value, index))


class _Submodules:
    """The converted modules of one gModule, named by their node's annotated name when it is a
    free Python name (no keyword, no GraphModule attribute), else by their 1-based index in the gModule's `modules` (torch7's
    g.modules[i]); a Lua module used by several nodes is converted once, its weights shared."""

    def __init__(self, gmodule: LuaObject, ctx: Context) -> None:
        self.ctx = ctx
        self.key = bridge().lua.globals().torch.pointer
        modules = ctx.modules(gmodule)
        self.index = {self.key(m._lua): i for i, m in reversed(list(enumerate(modules, 1)))}
        self.names: dict[int, str] = {}
        self.modules: dict[str, torch.nn.Module] = {}

    def name_of(self, module: LuaObject, annotations: Any) -> str | None:
        """The name of a node's module, None when it is not one of the gModule's `modules`."""
        key = self.key(module._lua)
        if key not in self.index:
            return None
        if key not in self.names:
            name = annotations["name"] if lupa.lua_type(annotations) == "table" else None
            taken = self.modules.keys() | set(dir(torch.fx.GraphModule))
            if not (isinstance(name, str) and name.isidentifier() and not keyword.iskeyword(name)
                    and name not in taken):
                name = str(self.index[key])
            self.modules[name] = self.ctx.child(module, name)
            self.names[key] = name
        return self.names[key]


def _table(value: Any) -> bool:
    return lupa.lua_type(value) == "table"


def _node_value(m: LuaObject, ctx: Context, graph: torch.fx.Graph, modules: _Submodules, values: dict[int, Value],
                where: str, data: Any) -> Value:
    """The fx value of one forward node (`data`: its data table, at field `where`), from the
    values of the nodes before it; a ConversionError names a node that is not what nngraph makes."""
    key = modules.key
    mapindex = data.mapindex
    if not _table(mapindex):
        raise ctx.bad(m, f"{where}.mapindex", f"is {describe(mapindex)}, expected the table of its input nodes")
    inputs = []
    for i in range(1, len(mapindex) + 1):
        parent = mapindex[i]
        if not _table(parent) or key(parent) not in values:
            raise ctx.bad(m, f"{where}.mapindex[{i}]", f"is {describe(parent)}, expected the data of a node before it")
        inputs.append(values[key(parent)])
    if not inputs:   # the input node: the gModule's input (a table of them when several)
        return graph.placeholder("inputs" if ctx.integer(m, "nInputs", 1) > 1 else "x")
    select = data.selectindex
    if select is not None:
        if not isinstance(select, int) or isinstance(select, bool) or select < 1:
            raise ctx.bad(m, f"{where}.selectindex", f"is {describe(select)}, expected a 1-based index")
        return _select(graph, inputs[0], select - 1)
    value = inputs[0] if len(inputs) == 1 else inputs
    if data.module is None:
        return value
    name = modules.name_of(wrap(data.module), data.annotations) if is_module(data.module) else None
    if name is None:
        raise ctx.bad(m, f"{where}.module", f"is {describe(data.module)}, expected one of its modules")
    return graph.call_module(name, (value,))


@converter("nn.gModule")
def _gmodule(m: LuaObject, ctx: Context) -> torch.fx.GraphModule:
    lua = m._lua
    modules = _Submodules(m, ctx)
    key = modules.key
    graph = torch.fx.Graph()
    values: dict[int, Value] = {}
    nodes = ctx.raw(m, "forwardnodes")
    if not _table(nodes) or not len(nodes):
        raise ctx.bad(m, "forwardnodes", f"is {describe(nodes)}, expected the table of its nodes")
    for i in range(1, len(nodes) + 1):
        node = nodes[i]
        data = node.data if _table(node) else None
        if not _table(data):
            raise ctx.bad(m, f"forwardnodes[{i}]", f"is {describe(node)} with no data table, expected a graph node")
        values[key(data)] = _node_value(m, ctx, graph, modules, values, f"forwardnodes[{i}].data", data)
    out = lua.outnode.data if _table(lua.outnode) else None
    if not _table(out) or key(out) not in values:
        raise ctx.bad(m, "outnode", f"is {describe(lua.outnode)}, expected one of its forward nodes")
    graph.output(values[key(out)])
    return torch.fx.GraphModule(modules.modules, graph, class_name="gModule")


class JustElement(torch.nn.Module):
    """nngraph.JustElement: the single element of a one-element list (what node:split(1) makes)."""

    def forward(self, input: list[Any]) -> Any:
        if len(input) != 1:
            raise ValueError(f"nngraph.JustElement: expecting a list of one element, got {len(input)}")
        return input[0]


class JustTable(torch.nn.Module):
    """nngraph.JustTable: x -> [x]."""

    def forward(self, input: Any) -> list[Any]:
        return [input]


class ModuleFromCriterion(torch.nn.Module):
    """nn.ModuleFromCriterion (a criterion called on nodes): [prediction, target] -> the loss as a
    one-element tensor; the target gets no gradient (torch7 gives it zeros)."""

    def __init__(self, criterion: torch.nn.Module) -> None:
        super().__init__()
        self.criterion = criterion

    def forward(self, input: list[Any]) -> torch.Tensor:
        prediction, target = input
        return self.criterion(prediction, target.detach()).reshape(1)


@converter("nn.ModuleFromCriterion")
def _module_from_criterion(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return ModuleFromCriterion(ctx.child(ctx.module(m, "criterion"), "criterion"))


@converter("nngraph.JustElement")
def _just_element(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return JustElement()


@converter("nngraph.JustTable")
def _just_table(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return JustTable()
