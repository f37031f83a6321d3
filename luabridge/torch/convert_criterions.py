"""Converters of torch7's criterions to the loss modules of `criterions` (1-based class targets
kept; sizeAverage = false becomes reduction 'sum'); the settings are read from the Lua fields."""
from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from ..core.proxy import LuaObject
from . import criterions as c
from .convert import Context, converter

POINTWISE = {
    "nn.MSECriterion": F.mse_loss,
    "nn.AbsCriterion": F.l1_loss,
    "nn.SmoothL1Criterion": F.smooth_l1_loss,
    "nn.SoftMarginCriterion": F.soft_margin_loss,
    "nn.DistKLDivCriterion": c.kl_div_torch7,
    "nn.BCECriterion": c.bce_torch7,
    "nn.MultiLabelSoftMarginCriterion": F.binary_cross_entropy_with_logits,
    "nn.MarginCriterion": c.hinge_torch7,
    "nn.HingeEmbeddingCriterion": F.hinge_embedding_loss,
}


def _size_average(m: LuaObject, ctx: Context) -> bool:
    return ctx.flag(m, "sizeAverage", True)


def _margin(m: LuaObject, ctx: Context) -> float:
    return ctx.number(m, "margin")


@converter(*POINTWISE)
def _pointwise(m: LuaObject, ctx: Context) -> torch.nn.Module:
    options: dict[str, Any] = {} if m._lua["margin"] is None else {"margin": _margin(m, ctx)}
    return c.Pointwise(POINTWISE[m._typename()], _size_average(m, ctx), ctx.optional_tensor(m, "weights"), **options)


@converter("nn.WeightedMSECriterion")
def _weighted_mse(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return c.WeightedMSECriterion(ctx.tensor(m, "weight"), _size_average(m, ctx))


@converter("nn.SpatialAutoCropMSECriterion")
def _auto_crop_mse(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return c.SpatialAutoCropMSECriterion(_size_average(m, ctx))


@converter("nn.ClassSimplexCriterion")
def _class_simplex(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return c.ClassSimplexCriterion(ctx.tensor(m, "simplex", dims=(2,)), _size_average(m, ctx))


@converter("nn.ClassNLLCriterion", "nn.SpatialClassNLLCriterion")
def _class_nll(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return c.ClassNLLCriterion(ctx.optional_tensor(m, "weights"), _size_average(m, ctx),
                               ctx.integer(m, "ignoreIndex", -100))


@converter("nn.CrossEntropyCriterion")
def _cross_entropy(m: LuaObject, ctx: Context) -> torch.nn.Module:
    nll = ctx.module(m, "nll")
    # as the Lua criterion: its own sizeAverage wins once changed, else its inner nll's
    changed = m._lua["sizeAverage"] != m._lua["oldSizeAverage"]
    size_average = _size_average(m, ctx) if changed else _size_average(nll, ctx)
    return c.ClassNLLCriterion(ctx.optional_tensor(nll, "weights"), size_average, ctx.integer(nll, "ignoreIndex"),
                               scores=True)


@converter("cudnn.SpatialCrossEntropyCriterion", "cudnn.VolumetricCrossEntropyCriterion")
def _spatial_cross_entropy(m: LuaObject, ctx: Context) -> torch.nn.Module:
    spatial = ctx.module(m, "scec") if m._typename() == "cudnn.VolumetricCrossEntropyCriterion" else m
    # the spatial criterion hands its sizeAverage to its nll on every call
    return c.SpatialCrossEntropyCriterion(ctx.optional_tensor(ctx.module(spatial, "nll"), "weights"),
                                          _size_average(spatial, ctx))


@converter("nn.MultiMarginCriterion")
def _multi_margin(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return c.MultiMarginCriterion(ctx.integer(m, "p"), ctx.optional_tensor(m, "weights"), _margin(m, ctx),
                                  _size_average(m, ctx))


@converter("nn.MultiLabelMarginCriterion")
def _multi_label_margin(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return c.MultiLabelMarginCriterion(_size_average(m, ctx))


@converter("nn.CosineEmbeddingCriterion")
def _cosine_embedding(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return c.CosineEmbeddingCriterion(_margin(m, ctx), _size_average(m, ctx))


@converter("nn.MarginRankingCriterion")
def _margin_ranking(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return c.MarginRankingCriterion(_margin(m, ctx), _size_average(m, ctx))


@converter("nn.L1HingeEmbeddingCriterion")
def _l1_hinge_embedding(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return c.L1HingeEmbeddingCriterion(_margin(m, ctx))


@converter("nn.DistanceRatioCriterion")
def _distance_ratio(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return c.DistanceRatioCriterion(_size_average(m, ctx))


def _weighted(m: LuaObject, ctx: Context) -> tuple[list[torch.nn.Module], list[float]]:
    """A criterion container's criterions, converted, and their weights (one number each)."""
    criterions = ctx.modules(m, "criterions")
    return ctx.children(criterions), ctx.numbers(m, "weights", len(criterions))


@converter("nn.ParallelCriterion")
def _parallel_criterion(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return c.ParallelCriterion(*_weighted(m, ctx), ctx.flag(m, "repeatTarget"))


@converter("nn.MultiCriterion")
def _multi_criterion(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return c.MultiCriterion(*_weighted(m, ctx))


@converter("nn.CriterionTable")
def _criterion_table(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return c.CriterionTable(ctx.child(ctx.module(m, "criterion"), "criterion"))


@converter("nn.ModuleCriterion")
def _module_criterion(m: LuaObject, ctx: Context) -> torch.nn.Module:
    def optional(field: str) -> torch.nn.Module | None:
        return None if m._lua[field] is None else ctx.child(ctx.module(m, field), field)
    return c.ModuleCriterion(ctx.child(ctx.module(m, "criterion"), "criterion"), optional("inputModule"),
                             optional("targetModule"))
