"""Converters of torch7's criterions to the loss modules of `criterions` (1-based class targets
kept; sizeAverage = false becomes reduction 'sum'); the settings are read from the Lua fields."""
from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from ..proxy import LuaObject
from . import criterions as c
from .convert import Context, converter, tensor

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


def _size_average(m: LuaObject) -> bool:
    return m._lua["sizeAverage"] is not False


def _optional_tensor(m: LuaObject, field: str) -> torch.Tensor | None:
    value = m._lua[field]
    return None if value is None else tensor(value)


def _margin(m: LuaObject) -> float:
    return float(m.margin)


@converter(*POINTWISE)
def _pointwise(m: LuaObject, ctx: Context) -> torch.nn.Module:
    options: dict[str, Any] = {} if m._lua["margin"] is None else {"margin": _margin(m)}
    return c.Pointwise(POINTWISE[m._typename()], _size_average(m), _optional_tensor(m, "weights"), **options)


@converter("nn.WeightedMSECriterion")
def _weighted_mse(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return c.WeightedMSECriterion(tensor(m.weight), _size_average(m))


@converter("nn.SpatialAutoCropMSECriterion")
def _auto_crop_mse(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return c.SpatialAutoCropMSECriterion(_size_average(m))


@converter("nn.ClassSimplexCriterion")
def _class_simplex(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return c.ClassSimplexCriterion(tensor(m.simplex), _size_average(m))


@converter("nn.ClassNLLCriterion", "nn.SpatialClassNLLCriterion")
def _class_nll(m: LuaObject, ctx: Context) -> torch.nn.Module:
    ignore = m._lua["ignoreIndex"]
    return c.ClassNLLCriterion(_optional_tensor(m, "weights"), _size_average(m),
                               -100 if ignore is None else int(ignore))


@converter("nn.CrossEntropyCriterion")
def _cross_entropy(m: LuaObject, ctx: Context) -> torch.nn.Module:
    nll = m.nll
    # as the Lua criterion: its own sizeAverage wins once changed, else its inner nll's
    changed = m._lua["sizeAverage"] != m._lua["oldSizeAverage"]
    size_average = _size_average(m) if changed else _size_average(nll)
    return c.ClassNLLCriterion(_optional_tensor(nll, "weights"), size_average, int(nll.ignoreIndex), scores=True)


@converter("cudnn.SpatialCrossEntropyCriterion", "cudnn.VolumetricCrossEntropyCriterion")
def _spatial_cross_entropy(m: LuaObject, ctx: Context) -> torch.nn.Module:
    spatial = m.scec if m._typename() == "cudnn.VolumetricCrossEntropyCriterion" else m
    # the spatial criterion hands its sizeAverage to its nll on every call
    return c.SpatialCrossEntropyCriterion(_optional_tensor(spatial.nll, "weights"), _size_average(spatial))


@converter("nn.MultiMarginCriterion")
def _multi_margin(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return c.MultiMarginCriterion(int(m.p), _optional_tensor(m, "weights"), _margin(m), _size_average(m))


@converter("nn.MultiLabelMarginCriterion")
def _multi_label_margin(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return c.MultiLabelMarginCriterion(_size_average(m))


@converter("nn.CosineEmbeddingCriterion")
def _cosine_embedding(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return c.CosineEmbeddingCriterion(_margin(m), _size_average(m))


@converter("nn.MarginRankingCriterion")
def _margin_ranking(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return c.MarginRankingCriterion(_margin(m), _size_average(m))


@converter("nn.L1HingeEmbeddingCriterion")
def _l1_hinge_embedding(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return c.L1HingeEmbeddingCriterion(_margin(m))


@converter("nn.DistanceRatioCriterion")
def _distance_ratio(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return c.DistanceRatioCriterion(_size_average(m))


@converter("nn.ParallelCriterion")
def _parallel_criterion(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return c.ParallelCriterion(ctx.children(m.criterions), [float(w) for w in m.weights], bool(m._lua["repeatTarget"]))


@converter("nn.MultiCriterion")
def _multi_criterion(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return c.MultiCriterion(ctx.children(m.criterions), [float(w) for w in m.weights])


@converter("nn.CriterionTable")
def _criterion_table(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return c.CriterionTable(ctx.child(m.criterion, "criterion"))


@converter("nn.ModuleCriterion")
def _module_criterion(m: LuaObject, ctx: Context) -> torch.nn.Module:
    def optional(field: str) -> torch.nn.Module | None:
        module = m._lua[field]
        return None if module is None else ctx.child(getattr(m, field), field)
    return c.ModuleCriterion(ctx.child(m.criterion, "criterion"), optional("inputModule"), optional("targetModule"))
