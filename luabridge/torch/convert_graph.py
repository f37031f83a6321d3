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

from ..proxy import LuaObject, wrap
from ..pyside import lua_list
from ..runtime import bridge
from .convert import Context, converter

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

    def __init__(self, gmodule: Any, ctx: Context) -> None:
        self.ctx = ctx
        self.key = bridge().lua.globals().torch.pointer
        self.index = {self.key(m): i for i, m in reversed(list(enumerate(lua_list(gmodule.modules), 1)))}
        self.names: dict[int, str] = {}
        self.modules: dict[str, torch.nn.Module] = {}

    def name_of(self, module: Any, annotations: Any) -> str:
        key = self.key(module)
        if key not in self.names:
            name = annotations["name"] if annotations is not None else None
            taken = self.modules.keys() | set(dir(torch.fx.GraphModule))
            if not (isinstance(name, str) and name.isidentifier() and not keyword.iskeyword(name)
                    and name not in taken):
                name = str(self.index[key])
            self.modules[name] = self.ctx.child(wrap(module), name)
            self.names[key] = name
        return self.names[key]


@converter("nn.gModule")
def _gmodule(m: LuaObject, ctx: Context) -> torch.fx.GraphModule:
    lua = m._lua
    modules = _Submodules(lua, ctx)
    key = modules.key
    graph = torch.fx.Graph()
    values: dict[int, Value] = {}
    for node in lua_list(lua.forwardnodes):
        data = node.data
        inputs = [values[key(d)] for d in lua_list(data.mapindex)]
        if not inputs:   # the input node: the gModule's input (a table of them when several)
            value: Value = graph.placeholder("inputs" if (lua.nInputs or 1) > 1 else "x")
        elif data.selectindex is not None:
            value = _select(graph, inputs[0], data.selectindex - 1)
        else:
            value = inputs[0] if len(inputs) == 1 else inputs
            if data.module is not None:
                value = graph.call_module(modules.name_of(data.module, data.annotations), (value,))
        values[key(data)] = value
    graph.output(values[key(lua.outnode.data)])
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
    return ModuleFromCriterion(ctx.child(m.criterion, "criterion"))


@converter("nngraph.JustElement")
def _just_element(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return JustElement()


@converter("nngraph.JustTable")
def _just_table(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return JustTable()
