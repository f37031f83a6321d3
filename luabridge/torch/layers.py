"""PyTorch modules that stand for torch7 nn layers with no exact PyTorch module (used by
`convert_layers`). Dims given to them are 0-based; the torch7 batch rules (numInputDims,
nInputDims, a non-batch input one dim short) are kept as torch7's nn states them."""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import torch
import torch.nn.functional as F


class _FramesFirst:
    """Mixin for torch7's temporal layers: input frames x frameSize (or batch x frames x
    frameSize), PyTorch's 1D layer over the frames between two transposes."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x.transpose(-1, -2)).transpose(-1, -2)


class TemporalConvolution(_FramesFirst, torch.nn.Conv1d):
    """nn.TemporalConvolution."""


class TemporalMaxPooling(_FramesFirst, torch.nn.MaxPool1d):
    """nn.TemporalMaxPooling."""


class _SizedByTarget:
    """Mixin for torch7's full convolutions, which also take {input, target}: the output then
    grows by (target size + 2 pad - kernel) mod stride in each dim instead of by adj."""

    def forward(self, x: torch.Tensor | Sequence[torch.Tensor]) -> torch.Tensor:
        if isinstance(x, torch.Tensor):
            return super().forward(x)
        x, target = x
        dims = len(self.kernel_size)
        sizes = [(n - 1) * d - 2 * p + k + (t + 2 * p - k) % d for n, t, k, d, p in zip(
            x.shape[-dims:], target.shape[-dims:], self.kernel_size, self.stride, self.padding)]
        return super().forward(x, output_size=sizes)


class FullConvolution(_SizedByTarget, torch.nn.ConvTranspose2d):
    """nn.SpatialFullConvolution."""


class VolumetricFullConvolution(_SizedByTarget, torch.nn.ConvTranspose3d):
    """nn.VolumetricFullConvolution."""


class _OneShortBatch:
    """Mixin for torch7 layers that also take one sample without its batch dim (`batch_dims`
    dims make a batch)."""

    batch_dims = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() == self.batch_dims - 1:
            return super().forward(x.unsqueeze(0)).squeeze(0)
        return super().forward(x)


class BatchNorm1d(_OneShortBatch, torch.nn.BatchNorm1d):
    """nn.BatchNormalization: batch x features; one sample (features) in evaluation."""
    batch_dims = 2


class BatchNorm2d(_OneShortBatch, torch.nn.BatchNorm2d):
    """nn.SpatialBatchNormalization."""
    batch_dims = 4


class BatchNorm3d(_OneShortBatch, torch.nn.BatchNorm3d):
    """nn.VolumetricBatchNormalization."""
    batch_dims = 5


class Upsample(_OneShortBatch, torch.nn.Upsample):
    """nn.SpatialUpSamplingNearest / Bilinear: planes x H x W or batch x planes x H x W."""
    batch_dims = 4


class Dropout(torch.nn.Module):
    """torch7's dropouts that PyTorch lacks: nn.Dropout v1 (no scaling in training, times 1-p in
    evaluation) and nn.SpatialDropout / VolumetricDropout (one draw per plane, v1 scaling).
    `plane_dims` is the dims of one sample for the per-plane ones (0: per element);
    `stochastic` keeps drawing in evaluation (torch7's stochastic_inference)."""

    def __init__(self, p: float, scaled: bool, plane_dims: int = 0, stochastic: bool = False) -> None:
        super().__init__()
        self.p, self.scaled, self.plane_dims, self.stochastic = p, scaled, plane_dims, stochastic

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.p == 0:
            return x
        if not (self.training or self.stochastic):
            return x if self.scaled else x * (1 - self.p)
        size = list(x.shape)
        if self.plane_dims:
            for d in range(x.dim() - self.plane_dims + 1, x.dim()):
                size[d] = 1
        noise = torch.empty(size, dtype=x.dtype, device=x.device).bernoulli_(1 - self.p)
        return x * (noise / (1 - self.p) if self.scaled else noise)

    def extra_repr(self) -> str:
        return f"p={self.p}, scaled={self.scaled}, plane_dims={self.plane_dims}"


def _plane_dim(x: torch.Tensor) -> int:
    """torch7's softmax dim: the planes of 1D / 3D input, dim 2 (1-based) of a 2D / 4D batch."""
    if not 1 <= x.dim() <= 4:
        raise ValueError(f"softmax: 1D, 2D, 3D or 4D input expected, got {tuple(x.shape)}")
    return (x.dim() + 1) % 2


class SoftMax(torch.nn.Module):
    """nn.SoftMax / LogSoftMax / SoftMin / SpatialSoftMax (over the planes at each position);
    `over`: "planes" (nn), "instance" (all of each sample's values, cudnn.SoftMax) or
    "volume" (the planes of 4D / 5D input, cudnn.VolumetricSoftMax)."""

    def __init__(self, log: bool = False, negate: bool = False, over: str = "planes") -> None:
        super().__init__()
        self.log, self.negate, self.over = log, negate, over

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f = F.log_softmax if self.log else F.softmax
        if self.negate:
            x = -x
        if self.over == "volume":
            return f(x, x.dim() - 4)
        dim = _plane_dim(x)
        if self.over == "instance":
            n = x.shape[0] if dim == 1 else 1
            return f(x.reshape(n, -1), 1).reshape(x.shape)
        return f(x, dim)

    def extra_repr(self) -> str:
        return f"log={self.log}, negate={self.negate}, over={self.over!r}"


_POINTWISE: dict[str, Callable[[torch.Tensor, float], torch.Tensor]] = {
    "exp": lambda x, v: torch.exp(x),
    "log": lambda x, v: torch.log(x),
    "abs": lambda x, v: torch.abs(x),
    "square": lambda x, v: x * x,
    "sqrt": lambda x, v: torch.sqrt(x + v),
    "pow": lambda x, v: torch.pow(x, v),
    "mul": lambda x, v: x * v,
    "add": lambda x, v: x + v,
}


class Pointwise(torch.nn.Module):
    """An elementwise op without a PyTorch module: exp, log, abs, square, sqrt(x + value),
    pow(x, value), x * value, x + value (nn.Exp ... nn.Power, nn.MulConstant, nn.AddConstant)."""

    def __init__(self, op: str, value: float = 0.0) -> None:
        super().__init__()
        self.op, self.value = op, value

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _POINTWISE[self.op](x, self.value)

    def extra_repr(self) -> str:
        return f"{self.op}, value={self.value}"


class Broadcast(torch.nn.Module):
    """A learned tensor multiplied with (nn.CMul, nn.Mul) or added to (nn.CAdd, nn.Add) the input:
    elementwise when their sizes hold as many elements, broadcast over its size-1 dims when they
    have as many dims, else per sample of a batch (torch7's rules); `scalar`: one value for all."""

    def __init__(self, name: str, value: torch.Tensor, multiply: bool, scalar: bool = False) -> None:
        super().__init__()
        self.name, self.multiply, self.scalar = name, multiply, scalar
        self.register_parameter(name, torch.nn.Parameter(value))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        p = getattr(self, self.name)
        if self.scalar:
            w = p.reshape(())
        elif x.numel() == p.numel():
            w = p.reshape(x.shape)
        elif x.dim() == p.dim():
            w = p
        else:
            w = p.reshape(1, -1)
            out = x.reshape(x.shape[0], -1)
            return (out * w if self.multiply else out + w).reshape(x.shape)
        return x * w if self.multiply else x + w


class Normalize(torch.nn.Module):
    """nn.Normalize: each row over (sum |x|^p + eps)^(1/p), or over max |x| + eps for p = inf."""

    def __init__(self, p: float, eps: float) -> None:
        super().__init__()
        self.p, self.eps = p, eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(1, -1) if x.dim() == 1 else x
        if math.isinf(self.p):
            norm = rows.abs().amax(1, keepdim=True) + self.eps
        else:
            norm = (rows.abs().pow(self.p).sum(1, keepdim=True) + self.eps).pow(1 / self.p)
        return (rows / norm).reshape(x.shape)

    def extra_repr(self) -> str:
        return f"p={self.p}, eps={self.eps}"


class View(torch.nn.Module):
    """nn.View(sizes) with setNumInputDims: the leading dims beyond numInputDims (or the surplus
    elements when no size is -1) make a batch dim in front."""

    def __init__(self, size: Sequence[int], num_input_dims: int | None) -> None:
        super().__init__()
        self.size, self.num_input_dims = list(size), num_input_dims
        self.elements = math.prod(s for s in size if s >= 0)
        self.inferred = any(s < 0 for s in size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        nd = x.dim()
        ndim = min(self.num_input_dims if self.num_input_dims is not None else nd, nd)
        batch = 1 if self.inferred or self.elements == 0 else math.prod(x.shape[nd - ndim:]) // self.elements
        batch *= math.prod(x.shape[:nd - ndim])
        if batch == 1 and (self.num_input_dims is None or nd <= self.num_input_dims):
            return x.reshape(self.size)
        return x.reshape(batch, *self.size)

    def extra_repr(self) -> str:
        return f"size={self.size}, num_input_dims={self.num_input_dims}"


class Reshape(torch.nn.Module):
    """nn.Reshape(sizes[, batchMode]): a batch dim kept in front unless the input is one sample
    (as many elements and a first dim other than 1, or batchMode false)."""

    def __init__(self, size: Sequence[int], batch_mode: bool | None) -> None:
        super().__init__()
        self.size, self.batch_mode = list(size), batch_mode
        self.elements = math.prod(size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        single = self.batch_mode is False or (
            self.batch_mode is None and x.numel() == self.elements and x.shape[0] != 1)
        return x.reshape(self.size if single else [x.shape[0], *self.size])

    def extra_repr(self) -> str:
        return f"size={self.size}, batch_mode={self.batch_mode}"


def _batch_offset(x: torch.Tensor, num_input_dims: int | None) -> int:
    return x.dim() - num_input_dims if num_input_dims is not None else 0


class Transpose(torch.nn.Module):
    """nn.Transpose({a, b}, ...): the swaps in order (0-based dims), after the batch dims."""

    def __init__(self, swaps: Sequence[tuple[int, int]], num_input_dims: int | None) -> None:
        super().__init__()
        self.swaps, self.num_input_dims = [tuple(s) for s in swaps], num_input_dims

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        offset = _batch_offset(x, self.num_input_dims)
        for a, b in self.swaps:
            x = x.transpose(a + offset, b + offset)
        return x

    def extra_repr(self) -> str:
        return f"swaps={self.swaps}, num_input_dims={self.num_input_dims}"


class Squeeze(torch.nn.Module):
    """nn.Squeeze([dim[, numInputDims]]): one dim (0-based, shifted by a batch dim) or all size-1
    dims, keeping a batch of one."""

    def __init__(self, dim: int | None, num_input_dims: int | None) -> None:
        super().__init__()
        self.dim, self.num_input_dims = dim, num_input_dims

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batched = self.num_input_dims is not None and x.dim() == self.num_input_dims + 1
        if self.dim is not None:
            return x.squeeze(self.dim + (1 if batched else 0))
        out = x.squeeze()
        return out.unsqueeze(0) if batched and x.shape[0] == 1 else out

    def extra_repr(self) -> str:
        return f"dim={self.dim}, num_input_dims={self.num_input_dims}"


class Unsqueeze(torch.nn.Module):
    """nn.Unsqueeze(pos[, numInputDims]): a size-1 dim at pos (0-based), after the batch dims."""

    def __init__(self, pos: int, num_input_dims: int | None) -> None:
        super().__init__()
        self.pos, self.num_input_dims = pos, num_input_dims

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.unsqueeze(self.pos + _batch_offset(x, self.num_input_dims))

    def extra_repr(self) -> str:
        return f"pos={self.pos}, num_input_dims={self.num_input_dims}"


def torch7_dim(owner: torch.nn.Module, dimension: int, n_input_dims: int | None, ndim: int) -> int:
    """The 0-based dim of torch7's 1-based `dimension` (nn.Sum / Max / Narrow / Select / JoinTable /
    SplitTable) for an ndim-D input: negative counts from the end; with n_input_dims, an input with
    one more dim is a batch and the dim moves one right; out of range is an IndexError."""
    d = dimension
    if d < 0:
        d = ndim + d + 1
    elif n_input_dims is not None and ndim == n_input_dims + 1:
        d += 1
    if not 1 <= d <= ndim:
        raise IndexError(f"{type(owner).__name__}: dimension {dimension} out of range for a {ndim}D input")
    return d - 1


class Reduce(torch.nn.Module):
    """nn.Sum / Mean / Max / Min over a torch7 dim (1-based, see `torch7_dim`); Sum and Mean keep the
    dim when squeeze is false (and for 1D input), Max and Min drop it but for 1D input."""

    def __init__(self, op: str, dim: int, n_input_dims: int | None, squeeze: bool = True) -> None:
        super().__init__()
        self.op, self.dim, self.n_input_dims, self.squeeze = op, dim, n_input_dims, squeeze

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d = torch7_dim(self, self.dim, self.n_input_dims, x.dim())
        keep = x.dim() == 1 or not self.squeeze
        if self.op == "sum":
            return x.sum(d, keepdim=keep)
        if self.op == "mean":
            return x.mean(d, keepdim=keep)
        return (x.amax if self.op == "max" else x.amin)(d, keepdim=keep)

    def extra_repr(self) -> str:
        return f"{self.op}, dim={self.dim} (torch7's), n_input_dims={self.n_input_dims}"


class Narrow(torch.nn.Module):
    """nn.Narrow(dim, offset, length): torch7's offset (1-based; negative from the end) and length
    (negative: up to that many from the end)."""

    def __init__(self, dim: int, offset: int, length: int) -> None:
        super().__init__()
        self.dim, self.offset, self.length = dim, offset, length

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d = torch7_dim(self, self.dim, None, x.dim())
        size, offset, length = x.shape[d], self.offset, self.length
        if length < 0:
            length = size - offset + length + 2
        if offset < 0:
            offset, length = 1, size - length
        return x.narrow(d, offset - 1, length)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, offset={self.offset}, length={self.length} (torch7's)"


class Select(torch.nn.Module):
    """nn.Select(dim, index): torch7's 1-based dim and index (negative from the end)."""

    def __init__(self, dim: int, index: int) -> None:
        super().__init__()
        self.dim, self.index = dim, index

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d = torch7_dim(self, self.dim, None, x.dim())
        return x.select(d, self.index - 1 if self.index > 0 else x.shape[d] + self.index)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, index={self.index} (torch7's)"


class Replicate(torch.nn.Module):
    """nn.Replicate(n, dim, ndim): n copies stacked along a new dim (0-based, after a batch dim
    when the input has more than ndim dims)."""

    def __init__(self, n: int, dim: int, ndim: int | None) -> None:
        super().__init__()
        self.n, self.dim, self.ndim = n, dim, ndim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d = self.dim + (1 if self.ndim is not None and x.dim() > self.ndim else 0)
        return x.unsqueeze(d).expand(*x.shape[:d], self.n, *x.shape[d:])

    def extra_repr(self) -> str:
        return f"n={self.n}, dim={self.dim}, ndim={self.ndim}"


class Padding(torch.nn.Module):
    """nn.Padding(dim, pad, nInputDim, value, index): |pad| entries of `value` inserted along dim,
    after (pad > 0) or before (pad < 0) the index-th entry counted from that end."""

    def __init__(self, dim: int, pad: int, n_input_dim: int | None, value: float, index: int) -> None:
        super().__init__()
        self.dim, self.pad, self.n_input_dim, self.value, self.index = dim, pad, n_input_dim, value, index

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d = self.dim - 1 + (1 if self.n_input_dim is not None and x.dim() != self.n_input_dim else 0)
        size = x.shape[d]
        at = size - self.index + 1 if self.pad > 0 else self.index - 1   # entries before the fill
        shape = list(x.shape)
        shape[d] = abs(self.pad)
        fill = x.new_full(shape, self.value)
        return torch.cat([x.narrow(d, 0, at), fill, x.narrow(d, at, size - at)], d)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, pad={self.pad}, value={self.value}, index={self.index} (torch7's)"


class Contiguous(torch.nn.Module):
    """nn.Contiguous."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.contiguous()


class Cast(torch.nn.Module):
    """nn.Copy(intype, outtype): the input as `dtype`."""

    def __init__(self, dtype: torch.dtype) -> None:
        super().__init__()
        self.dtype = dtype

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.to(self.dtype)

    def extra_repr(self) -> str:
        return str(self.dtype)


class LookupTable(torch.nn.Embedding):
    """nn.LookupTable: an Embedding indexed from 1, as torch7 (indices of any number type)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x.long() - 1)


class Bilinear(torch.nn.Bilinear):
    """nn.Bilinear: takes its two inputs as one list, as torch7 takes a table."""

    def forward(self, x: Sequence[torch.Tensor]) -> torch.Tensor:
        return super().forward(x[0], x[1])


class PReLU(torch.nn.PReLU):
    """nn.PReLU(n): n slopes for the planes (dim 0 of 1D input, dim 1 of a batch); one for all."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() == 1 and self.num_parameters > 1:
            return super().forward(x.unsqueeze(0)).squeeze(0)
        return super().forward(x)


class Concat(torch.nn.Module):
    """nn.Concat(dim) / DepthConcat(dim): each child on the same input, outputs joined along dim
    (0-based); DepthConcat (`centered`) zero-pads smaller outputs in the other dims, centred as
    torch7 places them (the extra entry after when the difference is odd)."""

    def __init__(self, dim: int, children: Sequence[torch.nn.Module], centered: bool = False) -> None:
        super().__init__()
        self.dim, self.centered = dim, centered
        for i, child in enumerate(children, start=1):
            self.add_module(str(i), child)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        outs = [child(x) for child in self.children()]
        if self.centered:
            size = [max(o.shape[d] for o in outs) for d in range(outs[0].dim())]
            outs = [_centered(o, size, self.dim) for o in outs]
        return torch.cat(outs, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, centered={self.centered}"


def _centered(t: torch.Tensor, size: list[int], skip: int) -> torch.Tensor:
    pads: list[int] = []
    for d in reversed(range(t.dim())):
        extra = 0 if d == skip else size[d] - t.shape[d]
        pads += [extra // 2, extra - extra // 2]
    return F.pad(t, pads) if any(pads) else t


class Parallel(torch.nn.Module):
    """nn.Parallel(inputDim, outputDim): child i on slice i of the input along input_dim, the
    outputs joined along output_dim (0-based)."""

    def __init__(self, input_dim: int, output_dim: int, children: Sequence[torch.nn.Module]) -> None:
        super().__init__()
        self.input_dim, self.output_dim = input_dim, output_dim
        for i, child in enumerate(children, start=1):
            self.add_module(str(i), child)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        slices = x.unbind(self.input_dim)
        return torch.cat([child(s) for child, s in zip(self.children(), slices)], self.output_dim)

    def extra_repr(self) -> str:
        return f"input_dim={self.input_dim}, output_dim={self.output_dim}"


class Collapse(torch.nn.Module):
    """nn.Collapse(nInputDim): one sample flattened, or each sample of a batch."""

    def __init__(self, n_input_dim: int) -> None:
        super().__init__()
        self.n_input_dim = n_input_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.reshape(x.shape[0], -1) if x.dim() > self.n_input_dim else x.reshape(-1)


class CReLU(torch.nn.Module):
    """nn.CReLU(nInputDims): relu(x) and relu(-x) joined along the features (the first dim of a
    sample)."""

    def __init__(self, n_input_dims: int) -> None:
        super().__init__()
        self.n_input_dims = n_input_dims

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([F.relu(x), F.relu(-x)], 1 if x.dim() == self.n_input_dims + 1 else 0)


class Resample(torch.nn.Module):
    """nn.UpSampling: nearest (an integer scale) or linear with the corners aligned (bilinear for
    4D input, trilinear for 5D), to a scale or to given sizes (depth, height, width)."""

    def __init__(self, scale: float | None, sizes: Sequence[int | None], linear: bool) -> None:
        super().__init__()
        self.scale, self.sizes, self.linear = scale, list(sizes), linear

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        size = None if self.scale else self.sizes[5 - x.dim():]
        if not self.linear:
            return F.interpolate(x, size=size, scale_factor=self.scale, mode="nearest")
        mode = "bilinear" if x.dim() == 4 else "trilinear"
        return F.interpolate(x, size=size, scale_factor=self.scale, mode=mode, align_corners=True)


class _ScaledGradient(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, factor: float) -> torch.Tensor:
        ctx.factor = factor
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple:
        return grad * ctx.factor, None


class GradientScale(torch.nn.Module):
    """The input unchanged, its gradient times `factor`: nn.GradientReversal(lambda) (-lambda)
    and nn.ZeroGrad (0)."""

    def __init__(self, factor: float) -> None:
        super().__init__()
        self.factor = factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ScaledGradient.apply(x, self.factor)

    def extra_repr(self) -> str:
        return f"factor={self.factor}"


class _OutputOnly:
    """Mixin for cudnn's recurrent layers, which give the output sequence (PyTorch's recurrent
    modules also return the last states)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x)[0]


class LSTM(_OutputOnly, torch.nn.LSTM):
    """cudnn.LSTM / BLSTM."""


class GRU(_OutputOnly, torch.nn.GRU):
    """cudnn.GRU / BGRU."""


class RNN(_OutputOnly, torch.nn.RNN):
    """cudnn.RNNTanh / RNNReLU."""
