"""Converters of torch7's table layers (and the decorator Bottle) to the modules of `tables`;
children convert through `Context.child` under their 1-based index (nn.Parallel: convert_layers)."""
from __future__ import annotations

from typing import Any, Callable

import torch

from ..proxy import LuaObject
from . import tables
from .convert import Context, converter


def _field(m: LuaObject, name: str) -> Any:
    """A field of the Lua module, None where it is nil."""
    return m._lua[name]


def _stateless(cls: type[torch.nn.Module]) -> Callable[[LuaObject, Context], torch.nn.Module]:
    def convert(m: LuaObject, ctx: Context) -> torch.nn.Module:
        return cls()
    return convert


for _name in ("CAddTable", "CSubTable", "CMulTable", "CDivTable", "CMaxTable", "CMinTable",
              "FlattenTable", "DotProduct", "CosineDistance", "MaskedSelect", "ZipTable",
              "ZipTableOneToMany", "CAddTensorTable"):
    converter(f"nn.{_name}")(_stateless(getattr(tables, _name)))


@converter("nn.ConcatTable")
def _concat_table(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return tables.ConcatTable(ctx.children(m.modules))


@converter("nn.ParallelTable")
def _parallel_table(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return tables.ParallelTable(ctx.children(m.modules))


@converter("nn.MapTable")
def _map_table(m: LuaObject, ctx: Context) -> torch.nn.Module:
    if _field(m, "shared") is False:
        raise ctx.fail(m, "has unshared clones (shared = false), which the conversion cannot keep")
    return tables.MapTable(ctx.child(m.module, 1))


@converter("nn.Bottle")
def _bottle(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return tables.Bottle(ctx.child(m.modules[0], 1), int(m.nInputDim), int(m.nOutputDim))


@converter("nn.JoinTable")
def _join_table(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return tables.JoinTable(int(m.dimension), _field(m, "nInputDims"))


@converter("nn.SplitTable")
def _split_table(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return tables.SplitTable(int(m.dimension), _field(m, "nInputDims"))


@converter("nn.SelectTable")
def _select_table(m: LuaObject, ctx: Context) -> torch.nn.Module:
    index = m.index
    if not isinstance(index, int) or index == 0:
        raise ctx.fail(m, f"selects key {index!r}; only nonzero integer indices convert (tables become lists)")
    return tables.SelectTable(index)


@converter("nn.NarrowTable")
def _narrow_table(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return tables.NarrowTable(int(m.offset), int(m.length))


@converter("nn.MM")
def _mm(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return tables.MM(bool(m.transA), bool(m.transB))


@converter("nn.MV")
def _mv(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return tables.MV(bool(m.trans))


@converter("nn.PairwiseDistance")
def _pairwise_distance(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return tables.PairwiseDistance(float(m.norm))


@converter("nn.MixtureTable")
def _mixture_table(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return tables.MixtureTable(_field(m, "dim"))


@converter("nn.Index")
def _index(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return tables.Index(int(m.dimension))
