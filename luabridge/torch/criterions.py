"""PyTorch loss modules with torch7's criterion semantics, for `convert`.

`forward(input, target)` returns the loss as a 0-d tensor (torch7 returns a number); table
inputs are lists. Targets are the ones the Lua criterion takes, so the same tensors feed both:
class indices stay torch7's **1-based** indices, of any dtype (a DoubleTensor of labels works),
shifted to PyTorch's 0-based ones inside (after a range check whose error names the 1-based
range); an elementwise target needs only the input's element count, as in torch7. `size_average=False` (torch7's sizeAverage) sums instead of averaging. Where a
torch.nn.functional loss computes torch7's numbers it does the work; the others are written
out with torch7's constants (eps in BCE's logs).
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .tables import Branches

Target = Any  # a tensor, or a number where the torch7 criterion takes one


def reduction(size_average: bool) -> str:
    return "mean" if size_average else "sum"


def zero_based(owner: nn.Module, target: Target, n_classes: int, allowed: int | None = None) -> Tensor:
    """torch7's 1-based class indices (any dtype, or a number) as PyTorch's 0-based longs, after
    checking them against [1, n_classes] (`allowed`: one more value taken, e.g. ignoreIndex)."""
    t = torch.as_tensor(target)
    bad = (t < 1) | (t > n_classes) | (t != t.floor() if t.is_floating_point() else False)
    if allowed is not None:
        bad &= t != allowed
    if bad.any():
        raise IndexError(f"{type(owner).__name__}: target {t[bad].reshape(-1)[0].item()} out of range, "
                         f"expected a class index in [1, {n_classes}] (torch7's 1-based classes)")
    return t.long() - 1


def target_like(target: Target, input: Tensor) -> Tensor:
    """An elementwise criterion's target in input's dtype and shape (a number fills it)."""
    t = torch.as_tensor(target, dtype=input.dtype, device=input.device)
    return t.expand_as(input) if t.dim() == 0 else t.reshape(input.shape)


def bce_torch7(input: Tensor, target: Tensor, weight: Tensor | None = None, reduction: str = "mean") -> Tensor:
    """Binary cross-entropy with torch7's 1e-12 inside both logs (x = 0 or 1 stays finite)."""
    eps = 1e-12
    loss = -(target * torch.log(input + eps) + (1 - target) * torch.log(1 - input + eps))
    if weight is not None:
        loss = loss * weight
    return loss.mean() if reduction == "mean" else loss.sum()


def hinge_torch7(input: Tensor, target: Tensor, margin: float = 1, reduction: str = "mean") -> Tensor:
    """nn.MarginCriterion's two-class hinge: max(0, margin - x y)."""
    loss = (margin - input * target).clamp(min=0)
    return loss.mean() if reduction == "mean" else loss.sum()


def kl_div_torch7(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """nn.DistKLDivCriterion: sum y (log y - x), averaged over all elements (PyTorch's 'mean')."""
    loss = F.kl_div(input, target, reduction="sum")
    return loss / input.numel() if reduction == "mean" else loss


class Pointwise(nn.Module):
    """A torch7 elementwise criterion: `loss(input, target, reduction=..., **options)`, with
    torch7's class weights (one per column) as a buffer passed as `weight` when there are some."""

    def __init__(self, loss: Callable[..., Tensor], size_average: bool = True,
                 weight: Tensor | None = None, **options: float) -> None:
        super().__init__()
        self.loss, self.reduction, self.options = loss, reduction(size_average), options
        self.register_buffer("weight", weight)

    def forward(self, input: Tensor, target: Target) -> Tensor:
        options = dict(self.options, weight=self.weight) if self.weight is not None else self.options
        return self.loss(input, target_like(target, input), reduction=self.reduction, **options)

    def extra_repr(self) -> str:
        return f"{self.loss.__name__}, reduction={self.reduction!r}, {self.options}"


class WeightedMSECriterion(nn.Module):
    """nn.WeightedMSECriterion: MSE against the target scaled elementwise by a fixed weight
    (applied to every sample of a batch)."""

    def __init__(self, weight: Tensor, size_average: bool = True) -> None:
        super().__init__()
        self.reduction = reduction(size_average)
        self.register_buffer("weight", weight)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        w = self.weight
        w = w.expand_as(input) if w.dim() == input.dim() - 1 else w.reshape(input.shape)
        scaled = target_like(target, input) * w
        return F.mse_loss(input, scaled, reduction=self.reduction)


class SpatialAutoCropMSECriterion(nn.Module):
    """nn.SpatialAutoCropMSECriterion: MSE against the centre crop of a (larger) target."""

    def __init__(self, size_average: bool = True) -> None:
        super().__init__()
        self.reduction = reduction(size_average)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        h, w = input.shape[-2:]
        top, left = (target.shape[-2] - h) // 2, (target.shape[-1] - w) // 2
        crop = target[..., top:top + h, left:left + w].to(input.dtype)
        return F.mse_loss(input, crop, reduction=self.reduction)


class ClassSimplexCriterion(nn.Module):
    """nn.ClassSimplexCriterion: MSE between the input and the simplex vertices of the
    (1-based) target classes, the vertices copied from the Lua criterion."""

    def __init__(self, simplex: Tensor, size_average: bool = True) -> None:
        super().__init__()
        self.reduction = reduction(size_average)
        self.register_buffer("simplex", simplex)

    def forward(self, input: Tensor, target: Target) -> Tensor:
        vertices = self.simplex[zero_based(self, target, self.simplex.shape[0])].to(input.dtype)
        return F.mse_loss(input, vertices.reshape(input.shape), reduction=self.reduction)


class ClassNLLCriterion(nn.Module):
    """nn.ClassNLLCriterion (log-probabilities, one row per sample, or N x C x H x W for
    SpatialClassNLLCriterion) against 1-based class targets; with `scores`, the input is raw
    scores and the module is nn.CrossEntropyCriterion (LogSoftMax first, size-1 dims dropped).
    `ignore_index` is torch7's (1-based)."""

    def __init__(self, weight: Tensor | None = None, size_average: bool = True,
                 ignore_index: int = -100, scores: bool = False) -> None:
        super().__init__()
        self.reduction, self.ignore_index, self.scores = reduction(size_average), ignore_index, scores
        self.register_buffer("weight", weight)

    def forward(self, input: Tensor, target: Target) -> Tensor:
        n_classes = input.shape[1] if input.dim() > 2 else input.shape[-1]
        t = zero_based(self, target, n_classes, self.ignore_index)
        if self.scores:
            input, t = input.squeeze(), t.squeeze()
            input = F.log_softmax(input, -1)
        if input.dim() == 1:
            t = t.reshape(-1)[0]   # one sample: torch7 reads the target's first element
        elif input.dim() == 2:
            t = t.reshape(-1)
        return F.nll_loss(input, t, self.weight, ignore_index=self.ignore_index - 1, reduction=self.reduction)


class SpatialCrossEntropyCriterion(ClassNLLCriterion):
    """cudnn.SpatialCrossEntropyCriterion and VolumetricCrossEntropyCriterion: a log-softmax over
    the classes (dim 2, 1-based) of N x C x (H x W or T x H x W) scores, then ClassNLL at every
    position."""

    def forward(self, input: Tensor, target: Target) -> Tensor:
        return super().forward(F.log_softmax(input, 1), target)


class MultiMarginCriterion(nn.Module):
    """nn.MultiMarginCriterion(p, weights, margin) against 1-based class targets."""

    def __init__(self, p: int = 1, weight: Tensor | None = None, margin: float = 1,
                 size_average: bool = True) -> None:
        super().__init__()
        self.p, self.margin, self.reduction = p, margin, reduction(size_average)
        self.register_buffer("weight", weight)

    def forward(self, input: Tensor, target: Target) -> Tensor:
        t = zero_based(self, target, input.shape[-1]).reshape(() if input.dim() == 1 else (-1,))
        return F.multi_margin_loss(input, t, self.p, self.margin, self.weight, reduction=self.reduction)


class MultiLabelMarginCriterion(nn.Module):
    """nn.MultiLabelMarginCriterion: each target row lists 1-based classes, ended by a 0."""

    def __init__(self, size_average: bool = True) -> None:
        super().__init__()
        self.reduction = reduction(size_average)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        t = zero_based(self, target, input.shape[-1], allowed=0)   # 0 ends a row's list
        return F.multilabel_margin_loss(input, t.reshape(input.shape), reduction=self.reduction)


def _label(y: Target, x: Tensor) -> Tensor:
    """The ±1 labels of the pair criterions: one per row of a 2-D x, one for vectors."""
    return torch.as_tensor(y, dtype=x.dtype).reshape(() if x.dim() == 1 else (-1,))


class CosineEmbeddingCriterion(nn.Module):
    """nn.CosineEmbeddingCriterion(margin): [x1, x2] and labels ±1 (a number for vectors)."""

    def __init__(self, margin: float = 0, size_average: bool = True) -> None:
        super().__init__()
        self.margin, self.reduction = margin, reduction(size_average)

    def forward(self, xs: list[Tensor], y: Target) -> Tensor:
        x1, x2 = xs
        return F.cosine_embedding_loss(x1, x2, _label(y, x1), self.margin, reduction=self.reduction)


class MarginRankingCriterion(nn.Module):
    """nn.MarginRankingCriterion(margin): max(0, -y (x1 - x2) + margin) per pair; a number y
    ranks the inputs' first elements only, as torch7."""

    def __init__(self, margin: float = 1, size_average: bool = True) -> None:
        super().__init__()
        self.margin, self.reduction = margin, reduction(size_average)

    def forward(self, xs: list[Tensor], y: Target) -> Tensor:
        x1, x2 = xs
        if isinstance(y, (int, float)):
            return (-y * (x1.reshape(-1)[0] - x2.reshape(-1)[0]) + self.margin).clamp(min=0)
        return F.margin_ranking_loss(x1, x2.reshape(x1.shape), target_like(y, x1), self.margin,
                                     reduction=self.reduction)


class L1HingeEmbeddingCriterion(nn.Module):
    """nn.L1HingeEmbeddingCriterion(margin): the L1 distance d of [x1, x2] for y = 1,
    max(0, margin - d) for y = -1."""

    def __init__(self, margin: float = 1) -> None:
        super().__init__()
        self.margin = margin

    def forward(self, xs: list[Tensor], y: Target) -> Tensor:
        x1, x2 = xs
        d = (x1 - x2.reshape(x1.shape)).abs().sum()
        return d if float(y) == 1 else (self.margin - d).clamp(min=0)


class DistanceRatioCriterion(nn.Module):
    """nn.DistanceRatioCriterion: [X, Y] distances -> sum X + log(exp(-X) + exp(-Y)), divided by
    the size of dim 1 when size_average; takes no target."""

    def __init__(self, size_average: bool = True) -> None:
        super().__init__()
        self.size_average = size_average

    def forward(self, xs: list[Tensor], target: Target = None) -> Tensor:
        x, y = xs
        loss = (x + torch.logaddexp(-x, -y.reshape(x.shape))).sum()
        return loss / x.shape[0] if self.size_average else loss


class ParallelCriterion(Branches):
    """nn.ParallelCriterion: sum_i w_i criterion_i(input[i], target[i] or the one target), the
    criterions named "1", "2"... as in torch7."""

    def __init__(self, criterions: Sequence[nn.Module], weights: Sequence[float], repeat_target: bool) -> None:
        super().__init__(criterions)
        self.weights, self.repeat_target = list(weights), repeat_target

    def forward(self, input: list[Any], target: Any) -> Tensor:
        return sum(w * c(input[i], target if self.repeat_target else target[i])
                   for i, (c, w) in enumerate(zip(self.children(), self.weights)))


class MultiCriterion(Branches):
    """nn.MultiCriterion: sum_i w_i criterion_i(input, target)."""

    def __init__(self, criterions: Sequence[nn.Module], weights: Sequence[float]) -> None:
        super().__init__(criterions)
        self.weights = list(weights)

    def forward(self, input: Any, target: Any) -> Tensor:
        return sum(w * c(input, target) for c, w in zip(self.children(), self.weights))


class CriterionTable(nn.Module):
    """nn.CriterionTable: a criterion as a module, forward([input, target]) -> the loss."""

    def __init__(self, criterion: nn.Module) -> None:
        super().__init__()
        self.criterion = criterion

    def forward(self, xs: list[Any]) -> Tensor:
        return self.criterion(xs[0], xs[1])


class ModuleCriterion(nn.Module):
    """nn.ModuleCriterion: criterion(input_module(input), target_module(target)), either module
    optional."""

    def __init__(self, criterion: nn.Module, input_module: nn.Module | None = None,
                 target_module: nn.Module | None = None) -> None:
        super().__init__()
        self.criterion, self.input_module, self.target_module = criterion, input_module, target_module

    def forward(self, input: Any, target: Any) -> Tensor:
        if self.input_module is not None:
            input = self.input_module(input)
        if self.target_module is not None:
            target = self.target_module(target)
        return self.criterion(input, target)
