"""Converters of torch7's table layers (and the decorator Bottle) to the modules of `tables`;
children convert through `Context.child` under their 1-based index (nn.Parallel: convert_layers)."""
from __future__ import annotations

from typing import Callable

import torch

from ..core.proxy import LuaObject
from . import tables
from .convert import Context, converter


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
    return tables.ConcatTable(ctx.children(ctx.modules(m)))


@converter("nn.ParallelTable")
def _parallel_table(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return tables.ParallelTable(ctx.children(ctx.modules(m)))


@converter("nn.MapTable")
def _map_table(m: LuaObject, ctx: Context) -> torch.nn.Module:
    if not ctx.flag(m, "shared", True):
        raise ctx.fail(m, "has unshared clones (shared = false), which the conversion cannot keep")
    return tables.MapTable(ctx.child(ctx.module(m, "module"), 1))


@converter("nn.Bottle")
def _bottle(m: LuaObject, ctx: Context) -> torch.nn.Module:
    modules = ctx.modules(m)
    if len(modules) != 1:
        raise ctx.bad(m, "modules", f"holds {len(modules)} modules, expected the one it wraps")
    return tables.Bottle(ctx.child(modules[0], 1), ctx.integer(m, "nInputDim", minimum=1),
                         ctx.integer(m, "nOutputDim", minimum=1))


@converter("nn.JoinTable")
def _join_table(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return tables.JoinTable(ctx.integer(m, "dimension"), ctx.integer(m, "nInputDims", None))


@converter("nn.SplitTable")
def _split_table(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return tables.SplitTable(ctx.integer(m, "dimension"), ctx.integer(m, "nInputDims", None))


@converter("nn.SelectTable")
def _select_table(m: LuaObject, ctx: Context) -> torch.nn.Module:
    index = ctx.raw(m, "index")
    if not isinstance(index, int) or isinstance(index, bool) or index == 0:
        raise ctx.fail(m, f"selects key {index!r}; only nonzero integer indices convert (tables become lists)")
    return tables.SelectTable(index)


@converter("nn.NarrowTable")
def _narrow_table(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return tables.NarrowTable(ctx.integer(m, "offset"), ctx.integer(m, "length"))


@converter("nn.MM")
def _mm(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return tables.MM(ctx.flag(m, "transA"), ctx.flag(m, "transB"))


@converter("nn.MV")
def _mv(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return tables.MV(ctx.flag(m, "trans"))


@converter("nn.PairwiseDistance")
def _pairwise_distance(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return tables.PairwiseDistance(ctx.number(m, "norm"))


@converter("nn.MixtureTable")
def _mixture_table(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return tables.MixtureTable(ctx.integer(m, "dim", None))


@converter("nn.Index")
def _index(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return tables.Index(ctx.integer(m, "dimension"))
