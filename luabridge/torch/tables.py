"""PyTorch modules standing for torch7's table layers, which torch.nn lacks.

A torch7 table is a Python list here: these modules take and return (nested) lists of tensors,
as `LuaModule` does with table inputs. They follow torch7's semantics, 1-based indices and
dimensions in the constructor arguments included, so a converted module keeps the Lua one's
numbers; the computing is PyTorch's own ops, so autograd gives the gradients.
"""
from __future__ import annotations

import functools
from typing import Any, Sequence

import torch
from torch import Tensor, nn

from .layers import torch7_dim

Table = list  # a torch7 table: a list of tensors or of nested lists


def _like(x: Tensor, ref: Tensor) -> Tensor:
    """x in ref's shape: torch7's elementwise table ops only need equal element counts."""
    return x.reshape(ref.shape)


class Branches(nn.Module):
    """A container whose children are named by torch7's 1-based index ("1", "2"...), as
    LuaModule and the converted Sequential name them (so parameters read "2.weight")."""

    def __init__(self, branches: Sequence[nn.Module]) -> None:
        super().__init__()
        for i, branch in enumerate(branches, start=1):
            self.add_module(str(i), branch)


class ConcatTable(Branches):
    """nn.ConcatTable: every branch gets the same input; the output lists their outputs."""

    def forward(self, x: Any) -> Table:
        return [branch(x) for branch in self.children()]


class ParallelTable(Branches):
    """nn.ParallelTable: branch i gets entry i of the input list."""

    def forward(self, xs: Table) -> Table:
        return [branch(x) for branch, x in zip(self.children(), xs)]


class MapTable(Branches):
    """nn.MapTable with shared parameters: one module (child "1") applied to every entry."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__([inner])

    def forward(self, xs: Table) -> Table:
        inner = self.get_submodule("1")
        return [inner(x) for x in xs]


class CAddTable(nn.Module):
    """nn.CAddTable: the elementwise sum, shaped as the first entry."""

    def forward(self, xs: Table) -> Tensor:
        return functools.reduce(torch.add, (_like(x, xs[0]) for x in xs))


class CSubTable(nn.Module):
    """nn.CSubTable: xs[0] - xs[1]."""

    def forward(self, xs: Table) -> Tensor:
        return xs[0] - _like(xs[1], xs[0])


class CMulTable(nn.Module):
    """nn.CMulTable: the elementwise product."""

    def forward(self, xs: Table) -> Tensor:
        return functools.reduce(torch.mul, (_like(x, xs[0]) for x in xs))


class CDivTable(nn.Module):
    """nn.CDivTable: xs[0] / xs[1]."""

    def forward(self, xs: Table) -> Tensor:
        return xs[0] / _like(xs[1], xs[0])


class CMaxTable(nn.Module):
    """nn.CMaxTable: the elementwise maximum (the gradient goes to the entry holding it)."""

    def forward(self, xs: Table) -> Tensor:
        return torch.stack([_like(x, xs[0]) for x in xs]).max(0).values


class CMinTable(nn.Module):
    """nn.CMinTable: the elementwise minimum."""

    def forward(self, xs: Table) -> Tensor:
        return torch.stack([_like(x, xs[0]) for x in xs]).min(0).values


class JoinTable(nn.Module):
    """nn.JoinTable(dimension, nInputDims): torch.cat along torch7's (1-based) dimension."""

    def __init__(self, dimension: int, n_input_dims: int | None = None) -> None:
        super().__init__()
        self.dimension, self.n_input_dims = dimension, n_input_dims

    def forward(self, xs: Table) -> Tensor:
        return torch.cat(xs, torch7_dim(self, self.dimension, self.n_input_dims, xs[0].dim()))


class SplitTable(nn.Module):
    """nn.SplitTable(dimension, nInputDims): the slices along torch7's dimension, as a list."""

    def __init__(self, dimension: int, n_input_dims: int | None = None) -> None:
        super().__init__()
        self.dimension, self.n_input_dims = dimension, n_input_dims

    def forward(self, x: Tensor) -> Table:
        return list(x.unbind(torch7_dim(self, self.dimension, self.n_input_dims, x.dim())))


class SelectTable(nn.Module):
    """nn.SelectTable(index): entry `index` (1-based; negative counts from the end) of the list."""

    def __init__(self, index: int) -> None:
        super().__init__()
        self.index = index

    def forward(self, xs: Table) -> Any:
        if not -len(xs) <= self.index <= len(xs):
            raise IndexError(f"SelectTable: index {self.index} does not exist in an input list of {len(xs)} entries")
        return xs[self.index if self.index < 0 else self.index - 1]


class NarrowTable(nn.Module):
    """nn.NarrowTable(offset, length): `length` entries from the 1-based `offset`."""

    def __init__(self, offset: int, length: int = 1) -> None:
        super().__init__()
        self.offset, self.length = offset, length

    def forward(self, xs: Table) -> Table:
        last = self.offset + self.length - 1
        if self.offset < 1 or last > len(xs):
            raise IndexError(f"NarrowTable: entries {self.offset} to {last} out of range of an input list "
                             f"of {len(xs)} entries")
        return list(xs[self.offset - 1:last])


def _flatten(x: Any, into: list[Tensor]) -> list[Tensor]:
    if isinstance(x, (list, tuple)):
        for entry in x:
            _flatten(entry, into)
    else:
        into.append(x)
    return into


class FlattenTable(nn.Module):
    """nn.FlattenTable: nested lists flattened depth-first into one list."""

    def forward(self, xs: Table) -> Table:
        return _flatten(xs, [])


def _matrices(x: Tensor) -> Tensor:
    """Each matrix of a matrix (2-D) or a batch of them (3-D) transposed."""
    return x.transpose(-2, -1)


class MM(nn.Module):
    """nn.MM(transA, transB): [A, B] -> A B, per sample for 3-D batches."""

    def __init__(self, trans_a: bool = False, trans_b: bool = False) -> None:
        super().__init__()
        self.trans_a, self.trans_b = trans_a, trans_b

    def forward(self, xs: Table) -> Tensor:
        a, b = xs
        return torch.matmul(_matrices(a) if self.trans_a else a, _matrices(b) if self.trans_b else b)


class MV(nn.Module):
    """nn.MV(trans): [M, v] -> M v, per sample for a 3-D M and a 2-D v."""

    def __init__(self, trans: bool = False) -> None:
        super().__init__()
        self.trans = trans

    def forward(self, xs: Table) -> Tensor:
        m, v = xs
        return torch.matmul(_matrices(m) if self.trans else m, v.unsqueeze(-1)).squeeze(-1)


def _rows(x: Tensor) -> Tensor:
    """A vector as one row, a matrix as it is (the pair layers' inputs)."""
    return x.reshape(1, -1) if x.dim() == 1 else x


class DotProduct(nn.Module):
    """nn.DotProduct: the dot product of each pair of rows (one element for two vectors)."""

    def forward(self, xs: Table) -> Tensor:
        return (_rows(xs[0]) * _rows(xs[1])).sum(1)


COSINE_EPS = 1e-12  # torch7 adds it to both squared norms


def row_cosines(x1: Tensor, x2: Tensor) -> Tensor:
    """The cosine of each pair of rows, with torch7's eps in the squared norms."""
    norms = ((x1 * x1).sum(1) + COSINE_EPS) * ((x2 * x2).sum(1) + COSINE_EPS)
    return (x1 * x2).sum(1) / norms.sqrt()


class CosineDistance(nn.Module):
    """nn.CosineDistance: the cosine similarity of each pair of rows (one element for vectors)."""

    def forward(self, xs: Table) -> Tensor:
        return row_cosines(_rows(xs[0]), _rows(xs[1]))


class _Torch7PNorm(torch.autograd.Function):
    """||d||_p of each row, with torch7's gradient: d |d|^(p-2) / (||d||_p + 1e-6)^(p-1) (the
    |d|^(p-2) factor only for p > 2, as torch7), sign(d) for p = 1."""

    @staticmethod
    def forward(ctx: Any, d: Tensor, p: float) -> Tensor:
        norm = d.abs().pow(p).sum(1).pow(1 / p)
        ctx.save_for_backward(d, norm)
        ctx.p = p
        return norm

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None]:
        d, norm = ctx.saved_tensors
        p = ctx.p
        if p == 1:
            g = d.sign()
        else:
            g = d * d.abs().pow(p - 2) if p > 2 else d
            g = g * (norm + 1e-6).pow(1 - p).unsqueeze(1)
        return g * grad.unsqueeze(1), None


class PairwiseDistance(nn.Module):
    """nn.PairwiseDistance(p): ||x1 - x2||_p of each pair of rows (one element for vectors)."""

    def __init__(self, p: float = 2) -> None:
        super().__init__()
        self.p = p

    def forward(self, xs: Table) -> Tensor:
        return _Torch7PNorm.apply(_rows(xs[0] - xs[1]), self.p)


class MixtureTable(nn.Module):
    """nn.MixtureTable(dim): [gater, experts] -> sum_i gater[.., i] expert_i, the experts a list
    or one tensor stacked along `dim` (1-based; default 1 for a 1-D gater, 2 for a batch)."""

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, xs: Table) -> Tensor:
        gater, experts = xs
        dim = self.dim or gater.dim()
        if isinstance(experts, (list, tuple)):
            experts = torch.stack(list(experts), dim - 1)
        shape = [1] * experts.dim()
        if gater.dim() == 2:
            shape[0] = gater.shape[0]
        shape[dim - 1] = gater.shape[-1]
        return (gater.reshape(shape) * experts).sum(dim - 1)


class Bottle(Branches):
    """nn.Bottle(module, nInputDim, nOutputDim): the module (child "1"), made for nInputDim-D
    inputs, run on inputs with more dims, the leading ones folded into the first and unfolded in
    the output."""

    def __init__(self, inner: nn.Module, n_input_dim: int = 2, n_output_dim: int | None = None) -> None:
        super().__init__([inner])
        self.n_input_dim, self.n_output_dim = n_input_dim, n_output_dim or n_input_dim

    def forward(self, x: Tensor) -> Tensor:
        inner = self.get_submodule("1")
        lead = x.dim() - self.n_input_dim   # the dims folded into the module's first
        if lead <= 0:
            return inner(x)
        y = inner(x.reshape(-1, *x.shape[lead + 1:]))
        return y.reshape(*x.shape[:lead], -1, *y.shape[1:])


class Index(nn.Module):
    """nn.Index(dimension): [t, indices] -> t.index_select along the 1-based dimension, with
    torch7's 1-based indices."""

    def __init__(self, dimension: int) -> None:
        super().__init__()
        self.dimension = dimension

    def forward(self, xs: Table) -> Tensor:
        t, indices = xs
        return t.index_select(self.dimension - 1, indices.long() - 1)


class MaskedSelect(nn.Module):
    """nn.MaskedSelect: [t, mask] -> the 1-D tensor of t's elements where the mask is nonzero."""

    def forward(self, xs: Table) -> Tensor:
        t, mask = xs
        return t.masked_select(_like(mask, t) != 0)


class ZipTable(nn.Module):
    """nn.ZipTable: a list of lists transposed ([[a1, a2], [b1, b2]] -> [[a1, b1], [a2, b2]])."""

    def forward(self, xs: Table) -> Table:
        return [list(entries) for entries in zip(*xs)]


class ZipTableOneToMany(nn.Module):
    """nn.ZipTableOneToMany: [v, [a, b]] -> [[v, a], [v, b]]."""

    def forward(self, xs: Table) -> Table:
        v, rest = xs
        return [[v, x] for x in rest]


class CAddTensorTable(nn.Module):
    """nn.CAddTensorTable: [v, [a, b]] -> [v + a, v + b]."""

    def forward(self, xs: Table) -> Table:
        v, rest = xs
        return [_like(x, v) + v for x in rest]
