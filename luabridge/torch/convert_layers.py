"""Converters of torch7's simple layers, convolutions, pooling, normalization, dropout, padding,
shape layers and containers (table layers and criterions: convert_tables, convert_criterions).
PyTorch's own module where it computes the same; else one of `layers`."""
from __future__ import annotations

import math

import torch

from ..core.proxy import LuaObject
from ..core.runtime import bridge
from . import layers
from .convert import Context, Converter, converter, describe, is_number, is_plain_table, tensor


def _has(m: LuaObject, name: str) -> bool:
    return m._lua[name] is not None


def _inplace(m: LuaObject, ctx: Context) -> bool:
    return ctx.flag(m, "inplace")


# ---- linear and convolutions

@converter("nn.Linear")
def _linear(m: LuaObject, ctx: Context) -> torch.nn.Module:
    weight = ctx.tensor(m, "weight", dims=(2,))
    module = torch.nn.Linear(weight.shape[1], weight.shape[0], bias=_has(m, "bias"), dtype=weight.dtype)
    return ctx.copy_into(module, m, "weight", "bias")


@converter("nn.LinearWeightNorm")
def _linear_weight_norm(m: LuaObject, ctx: Context) -> torch.nn.Module:
    """A Linear under PyTorch's weight_norm: g and v are its parameters, as in torch7."""
    v = ctx.tensor(m, "v", dims=(2,))
    g = ctx.tensor(m, "g", numel=v.shape[0])
    module = torch.nn.Linear(v.shape[1], v.shape[0], bias=_has(m, "bias"), dtype=v.dtype)
    ctx.copy_into(module, m, "bias")
    module = torch.nn.utils.parametrizations.weight_norm(module, "weight", dim=0)
    with torch.no_grad():
        module.parametrizations.weight.original0.copy_(g.reshape(-1, 1))
        module.parametrizations.weight.original1.copy_(v)
    return module


@converter("nn.Bilinear")
def _bilinear(m: LuaObject, ctx: Context) -> torch.nn.Module:
    weight = ctx.tensor(m, "weight", dims=(3,))
    out, in1, in2 = weight.shape
    module = layers.Bilinear(in1, in2, out, bias=_has(m, "bias"), dtype=weight.dtype)
    return ctx.copy_into(module, m, "weight", "bias")


def _conv(m: LuaObject, ctx: Context, dims: str, transposed: bool) -> torch.nn.Module:
    cls = {(2, False): torch.nn.Conv2d, (3, False): torch.nn.Conv3d,
           (2, True): layers.FullConvolution, (3, True): layers.VolumetricFullConvolution}[len(dims), transposed]
    groups = ctx.integer(m, "groups", 1, minimum=1)
    planes = {name: ctx.integer(m, name, minimum=1) for name in ("nInputPlane", "nOutputPlane")}
    for name, n in planes.items():
        if n % groups:
            raise ctx.bad(m, name, f"is {n}, not a multiple of groups ({groups})")
    kernel = ctx.integers(m, "k", dims, minimum=1)
    # checked before the module is made: its weight's size comes from these fields
    weight = ctx.tensor(m, "weight", numel=planes["nInputPlane"] * planes["nOutputPlane"] // groups * math.prod(kernel))
    options = dict(stride=ctx.integers(m, "d", dims, 1, minimum=1), padding=ctx.integers(m, "pad", dims, 0, minimum=0),
                   dilation=ctx.integers(m, "dilation", dims, 1, minimum=1), groups=groups,
                   bias=_has(m, "bias"), dtype=weight.dtype)
    if transposed:
        options["output_padding"] = ctx.integers(m, "adj", dims, 0, minimum=0)
    module = cls(planes["nInputPlane"], planes["nOutputPlane"], kernel, **options)
    return ctx.copy_into(module, m, "weight", "bias")


@converter("nn.SpatialConvolution", "nn.SpatialConvolutionMM", "nn.SpatialDilatedConvolution",
           "cudnn.SpatialConvolution")
def _spatial_conv(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return _conv(m, ctx, "HW", transposed=False)


@converter("nn.SpatialFullConvolution", "cudnn.SpatialFullConvolution")
def _spatial_full_conv(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return _conv(m, ctx, "HW", transposed=True)


@converter("nn.VolumetricConvolution", "nn.VolumetricDilatedConvolution", "cudnn.VolumetricConvolution")
def _volumetric_conv(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return _conv(m, ctx, "THW", transposed=False)


@converter("nn.VolumetricFullConvolution", "cudnn.VolumetricFullConvolution")
def _volumetric_full_conv(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return _conv(m, ctx, "THW", transposed=True)


@converter("nn.TemporalConvolution", "cudnn.TemporalConvolution")
def _temporal_conv(m: LuaObject, ctx: Context) -> torch.nn.Module:
    frame, out, k = (ctx.integer(m, name, minimum=1) for name in ("inputFrameSize", "outputFrameSize", "kW"))
    weight = ctx.tensor(m, "weight", numel=out * k * frame)
    module = layers.TemporalConvolution(frame, out, k, stride=ctx.integer(m, "dW", minimum=1),
                                        padding=ctx.integer(m, "padH", 0, minimum=0), dtype=weight.dtype)
    with torch.no_grad():   # torch7 lays a window out frame after frame: out x (k * frame)
        module.weight.copy_(weight.reshape(out, k, frame).transpose(1, 2))
        module.bias.copy_(ctx.tensor(m, "bias", numel=out))
    return module


@converter("nn.SpatialDepthWiseConvolution")
def _depthwise_conv(m: LuaObject, ctx: Context) -> torch.nn.Module:
    """Output plane i * multiplier + j is input plane i through filter j (torch7 keeps the filters
    as multiplier x planes)."""
    planes, multiplier = ctx.integer(m, "nInputPlane", minimum=1), ctx.integer(m, "nOutputPlane", minimum=1)
    kernel = ctx.integers(m, "k", "HW", minimum=1)
    weight = ctx.tensor(m, "weight", numel=multiplier * planes * kernel[0] * kernel[1])
    module = torch.nn.Conv2d(planes, planes * multiplier, kernel, ctx.integers(m, "d", "HW", minimum=1),
                             ctx.integers(m, "pad", "HW", 0, minimum=0), groups=planes, bias=_has(m, "bias"),
                             dtype=weight.dtype)
    with torch.no_grad():
        module.weight.copy_(weight.reshape(multiplier, planes, *kernel).transpose(0, 1).reshape(module.weight.shape))
        if module.bias is not None:
            bias = ctx.tensor(m, "bias", numel=multiplier * planes)
            module.bias.copy_(bias.reshape(multiplier, planes).t().reshape(-1))
    return module


_RECURRENT = {"CUDNN_LSTM": (layers.LSTM, 4, {}), "CUDNN_GRU": (layers.GRU, 3, {}),
              "CUDNN_RNN_TANH": (layers.RNN, 1, {"nonlinearity": "tanh"}),
              "CUDNN_RNN_RELU": (layers.RNN, 1, {"nonlinearity": "relu"})}


@converter("cudnn.RNN", "cudnn.LSTM", "cudnn.GRU", "cudnn.RNNTanh", "cudnn.RNNReLU", "cudnn.BLSTM", "cudnn.BGRU")
def _recurrent(m: LuaObject, ctx: Context) -> torch.nn.Module:
    """cuDNN's flat weight holds, per layer and direction in turn, the gates' input matrices, their
    recurrent ones, the input biases and the recurrent biases: PyTorch's weight_ih, weight_hh,
    bias_ih and bias_hh, whose gates come in cuDNN's order."""
    if ctx.flag(m, "rememberStates"):
        raise ctx.fail(m, "carries its hidden state from call to call (rememberStates), which PyTorch's "
                          "recurrent modules do not")
    if m._lua["hiddenInput"] is not None or m._lua["cellInput"] is not None:
        raise ctx.fail(m, "starts from a given hiddenInput / cellInput")
    cls, gates, options = _RECURRENT[ctx.string(m, "mode", list(_RECURRENT))]
    inputs, hidden, depth = (ctx.integer(m, name, minimum=1) for name in ("inputSize", "hiddenSize", "numLayers"))
    directions = ctx.integer(m, "numDirections", minimum=1)
    if directions > 2:
        raise ctx.bad(m, "numDirections", f"is {directions}, expected 1 or 2")
    module = cls(inputs, hidden, depth, batch_first=ctx.flag(m, "batchFirst"),
                 dropout=ctx.number(m, "dropout") if depth > 1 else 0.0, bidirectional=directions == 2,
                 dtype=ctx.tensor(m, "weight").dtype, **options)
    flat = ctx.tensor(m, "weight", numel=sum(p.numel() for p in module.parameters()))
    at = 0
    with torch.no_grad():
        for layer in range(depth):
            for direction in range(directions):
                suffix = f"_l{layer}" + ("_reverse" if direction else "")
                for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
                    p = getattr(module, name + suffix)
                    p.copy_(flat[at:at + p.numel()].view(p.shape))
                    at += p.numel()
    return module


# ---- pooling

@converter("nn.TemporalMaxPooling")
def _temporal_max_pool(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return layers.TemporalMaxPooling(ctx.integer(m, "kW", minimum=1), ctx.integer(m, "dW", minimum=1))


def _window(m: LuaObject, ctx: Context, dims: str) -> tuple[tuple[int, ...], ...]:
    """A pooling window's kernel, stride and padding fields."""
    return (ctx.integers(m, "k", dims, minimum=1), ctx.integers(m, "d", dims, minimum=1),
            ctx.integers(m, "pad", dims, 0, minimum=0))


def _max_pool(m: LuaObject, ctx: Context, cls: type, dims: str) -> torch.nn.Module:
    return cls(*_window(m, ctx, dims), ctx.integers(m, "dilation", dims, 1, minimum=1),
               ceil_mode=ctx.flag(m, "ceil_mode"))


@converter("nn.SpatialMaxPooling", "nn.SpatialDilatedMaxPooling", "cudnn.SpatialMaxPooling")
def _spatial_max_pool(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return _max_pool(m, ctx, torch.nn.MaxPool2d, "HW")


@converter("nn.VolumetricMaxPooling", "nn.VolumetricDilatedMaxPooling", "cudnn.VolumetricMaxPooling")
def _volumetric_max_pool(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return _max_pool(m, ctx, torch.nn.MaxPool3d, "THW")


def _avg_pool(m: LuaObject, ctx: Context, cls: type, dims: str) -> torch.nn.Module:
    if not ctx.flag(m, "divide", True):   # torch7's oldest files: sums (kept as a ConversionError)
        raise ctx.fail(m, "sums its windows (divide = false), which PyTorch's pooling does not")
    return cls(*_window(m, ctx, dims), ceil_mode=ctx.flag(m, "ceil_mode"),
               count_include_pad=ctx.flag(m, "count_include_pad", True))


@converter("nn.SpatialAveragePooling", "cudnn.SpatialAveragePooling")
def _spatial_avg_pool(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return _avg_pool(m, ctx, torch.nn.AvgPool2d, "HW")


@converter("nn.VolumetricAveragePooling", "cudnn.VolumetricAveragePooling")
def _volumetric_avg_pool(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return _avg_pool(m, ctx, torch.nn.AvgPool3d, "THW")


@converter("nn.SpatialAdaptiveMaxPooling")
def _adaptive_max_pool(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return torch.nn.AdaptiveMaxPool2d(ctx.integers(m, "", "HW", minimum=1))


@converter("nn.SpatialAdaptiveAveragePooling")
def _adaptive_avg_pool(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return torch.nn.AdaptiveAvgPool2d(ctx.integers(m, "", "HW", minimum=1))


@converter("nn.SpatialLPPooling")
def _lp_pool(m: LuaObject, ctx: Context) -> torch.nn.Module:
    """torch7 builds it as a Sequential of x^p, window sums and the 1/p power: PyTorch's LPPool2d."""
    power = next(iter(ctx.modules(m)), None)
    if power is None or power._typename() not in ("nn.Square", "nn.Power"):
        raise ctx.bad(m, "modules[1]", f"is {describe(power and power._lua)}, expected its nn.Square or nn.Power")
    p = 2.0 if power._typename() == "nn.Square" else ctx.number(power, "pow")
    return torch.nn.LPPool2d(p, ctx.integers(m, "k", "HW", minimum=1), ctx.integers(m, "d", "HW", minimum=1))


# ---- normalization, dropout

_BATCH_NORMS = {"nn.BatchNormalization": layers.BatchNorm1d, "nn.SpatialBatchNormalization": layers.BatchNorm2d,
                "nn.VolumetricBatchNormalization": layers.BatchNorm3d}


@converter(*_BATCH_NORMS, *(name.replace("nn.", "cudnn.") for name in _BATCH_NORMS))
def _batch_norm(m: LuaObject, ctx: Context) -> torch.nn.Module:
    cls = _BATCH_NORMS[m._typename().replace("cudnn.", "nn.")]
    mean = ctx.tensor(m, "running_mean")
    ctx.tensor(m, "running_var", numel=mean.numel())
    module = cls(mean.numel(), eps=ctx.number(m, "eps"), momentum=ctx.number(m, "momentum"),
                 affine=_has(m, "weight"), dtype=mean.dtype)
    return ctx.copy_into(module, m, "weight", "bias", "running_mean", "running_var")


@converter("nn.Dropout")
def _dropout(m: LuaObject, ctx: Context) -> torch.nn.Module:
    p, v2, stochastic = _probability(m, ctx), ctx.flag(m, "v2", True), ctx.flag(m, "stochastic_inference")
    if v2 and not stochastic:
        return torch.nn.Dropout(p, inplace=_inplace(m, ctx))
    return layers.Dropout(p, scaled=v2, stochastic=stochastic)


@converter("nn.SpatialDropout", "nn.VolumetricDropout")
def _plane_dropout(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return layers.Dropout(_probability(m, ctx), scaled=False, plane_dims=ctx.integer(m, "planeDims"),
                          stochastic=ctx.flag(m, "stochastic_inference"))


@converter("nn.Normalize")
def _normalize(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return layers.Normalize(ctx.number(m, "p"), ctx.number(m, "eps"))


@converter("nn.SpatialCrossMapLRN", "cudnn.SpatialCrossMapLRN")
def _lrn(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return torch.nn.LocalResponseNorm(ctx.integer(m, "size", minimum=1), *(ctx.number(m, f) for f in ("alpha", "beta", "k")))


# ---- activations and elementwise layers

def _probability(m: LuaObject, ctx: Context) -> float:
    p = ctx.number(m, "p")
    if not 0 <= p <= 1:
        raise ctx.bad(m, "p", f"is {p}, expected a probability (0 <= p <= 1)")
    return p


def _hardtanh(m: LuaObject, ctx: Context) -> torch.nn.Module:
    low, high = ctx.number(m, "min_val"), ctx.number(m, "max_val")
    if not high > low:   # as torch7's constructor asserts
        raise ctx.bad(m, "max_val", f"is {high}, expected more than min_val ({low})")
    return torch.nn.Hardtanh(low, high, _inplace(m, ctx))


def _cudnn_softmax(m: LuaObject, ctx: Context) -> torch.nn.Module:
    """cudnn.SpatialSoftMax in the mode and algorithm its fields name."""
    instance = ctx.raw(m, "mode") == "CUDNN_SOFTMAX_MODE_INSTANCE"
    return layers.SoftMax(log=ctx.raw(m, "algorithm") == "CUDNN_SOFTMAX_LOG",
                          over="instance" if instance else "planes")


def _numbers(m: LuaObject, ctx: Context, *names: str) -> list[float]:
    return [ctx.number(m, name) for name in names]


def _simple(name: str, make: Converter) -> None:
    """Registers a converter for a layer whose PyTorch module `make(m, ctx)` builds from its fields."""
    converter(name)(make)


for _name, _make in {
    "nn.Tanh": lambda m, ctx: torch.nn.Tanh(), "cudnn.Tanh": lambda m, ctx: torch.nn.Tanh(),
    "nn.Sigmoid": lambda m, ctx: torch.nn.Sigmoid(), "cudnn.Sigmoid": lambda m, ctx: torch.nn.Sigmoid(),
    "nn.ReLU": lambda m, ctx: torch.nn.ReLU(_inplace(m, ctx)), "cudnn.ReLU": lambda m, ctx: torch.nn.ReLU(_inplace(m, ctx)),
    "nn.Threshold": lambda m, ctx: torch.nn.Threshold(*_numbers(m, ctx, "threshold", "val"), _inplace(m, ctx)),
    "nn.HardTanh": _hardtanh, "nn.Clamp": _hardtanh, "cudnn.ClippedReLU": _hardtanh,
    "nn.ReLU6": lambda m, ctx: torch.nn.ReLU6(_inplace(m, ctx)),
    "nn.LeakyReLU": lambda m, ctx: torch.nn.LeakyReLU(ctx.number(m, "negval"), _inplace(m, ctx)),
    "nn.ELU": lambda m, ctx: torch.nn.ELU(ctx.number(m, "alpha"), _inplace(m, ctx)),
    "nn.RReLU": lambda m, ctx: torch.nn.RReLU(*_numbers(m, ctx, "lower", "upper"), _inplace(m, ctx)),
    "nn.SoftPlus": lambda m, ctx: torch.nn.Softplus(*_numbers(m, ctx, "beta", "threshold")),
    "nn.SoftSign": lambda m, ctx: torch.nn.Softsign(), "nn.LogSigmoid": lambda m, ctx: torch.nn.LogSigmoid(),
    "nn.TanhShrink": lambda m, ctx: torch.nn.Tanhshrink(),
    "nn.SoftShrink": lambda m, ctx: torch.nn.Softshrink(ctx.number(m, "lambda")),
    "nn.HardShrink": lambda m, ctx: torch.nn.Hardshrink(ctx.number(m, "lambda")),
    "nn.Exp": lambda m, ctx: layers.Pointwise("exp"), "nn.Log": lambda m, ctx: layers.Pointwise("log"),
    "nn.Abs": lambda m, ctx: layers.Pointwise("abs"), "nn.Square": lambda m, ctx: layers.Pointwise("square"),
    "nn.Sqrt": lambda m, ctx: layers.Pointwise("sqrt", ctx.number(m, "eps", 0.0)),
    "nn.Power": lambda m, ctx: layers.Pointwise("pow", ctx.number(m, "pow")),
    "nn.MulConstant": lambda m, ctx: layers.Pointwise("mul", ctx.number(m, "constant_scalar")),
    "nn.AddConstant": lambda m, ctx: layers.Pointwise("add", ctx.number(m, "constant_scalar")),
    "nn.SoftMax": lambda m, ctx: layers.SoftMax(), "nn.LogSoftMax": lambda m, ctx: layers.SoftMax(log=True),
    "nn.SoftMin": lambda m, ctx: layers.SoftMax(negate=True),
    "nn.SpatialSoftMax": lambda m, ctx: layers.SoftMax(),
    "nn.SpatialLogSoftMax": lambda m, ctx: layers.SoftMax(log=True),
    "cudnn.SpatialSoftMax": _cudnn_softmax, "cudnn.SpatialLogSoftMax": _cudnn_softmax,
    "cudnn.SoftMax": lambda m, ctx: layers.SoftMax(over="instance"),
    "cudnn.LogSoftMax": lambda m, ctx: layers.SoftMax(log=True, over="instance"),
    "cudnn.VolumetricSoftMax": lambda m, ctx: layers.SoftMax(over="volume"),
    "cudnn.VolumetricLogSoftMax": lambda m, ctx: layers.SoftMax(log=True, over="volume"),
}.items():
    _simple(_name, _make)


@converter("nn.GatedLinearUnit")
def _glu(m: LuaObject, ctx: Context) -> torch.nn.Module:
    dim = ctx.integer(m, "dim", None)
    return torch.nn.GLU(-1 if dim is None else dim - 1)


@converter("nn.CReLU")
def _crelu(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return layers.CReLU(ctx.integer(m, "nInputDims"))


@converter("nn.GradientReversal")
def _gradient_reversal(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return layers.GradientScale(-ctx.number(m, "lambda"))


@converter("nn.ZeroGrad")
def _zero_grad(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return layers.GradientScale(0.0)


@converter("nn.PReLU")
def _prelu(m: LuaObject, ctx: Context) -> torch.nn.Module:
    weight = ctx.tensor(m, "weight")
    return ctx.copy_into(layers.PReLU(weight.numel(), dtype=weight.dtype), m, "weight")


@converter("nn.CMul", "nn.Mul")
def _cmul(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return layers.Broadcast("weight", ctx.tensor(m, "weight"), multiply=True, scalar=m._typename() == "nn.Mul")


@converter("nn.CAdd", "nn.Add")
def _cadd(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return layers.Broadcast("bias", ctx.tensor(m, "bias"), multiply=False, scalar=ctx.flag(m, "scalar"))


@converter("nn.LookupTable")
def _lookup_table(m: LuaObject, ctx: Context) -> torch.nn.Module:
    weight = ctx.tensor(m, "weight", dims=(2,))
    padding = ctx.integer(m, "paddingValue", 0)
    module = layers.LookupTable(*weight.shape, padding_idx=padding - 1 if 0 < padding <= len(weight) else None,
                                max_norm=ctx.number(m, "maxNorm", None), norm_type=ctx.number(m, "normType", 2.0),
                                scale_grad_by_freq=ctx.flag(m, "shouldScaleGradByFreq"), dtype=weight.dtype)
    return ctx.copy_into(module, m, "weight")


# ---- resampling and padding

@converter("nn.SpatialUpSamplingNearest")
def _upsample_nearest(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return layers.Upsample(scale_factor=ctx.number(m, "scale_factor"), mode="nearest")


@converter("nn.SpatialUpSamplingBilinear")
def _upsample_bilinear(m: LuaObject, ctx: Context) -> torch.nn.Module:
    scale = ctx.number(m, "scale_factor", None)
    if scale is None:
        size = (ctx.integer(m, "oheight", minimum=1), ctx.integer(m, "owidth", minimum=1))
        return layers.Upsample(size=size, mode="bilinear", align_corners=True)
    return layers.Upsample(scale_factor=scale, mode="bilinear", align_corners=True)


@converter("nn.UpSampling")
def _upsampling(m: LuaObject, ctx: Context) -> torch.nn.Module:
    sizes = [ctx.integer(m, f, None, minimum=1) for f in ("odepth", "oheight", "owidth")]
    return layers.Resample(ctx.number(m, "scale_factor", None), sizes,
                           linear=ctx.string(m, "mode", ("nearest", "linear")) == "linear")


@converter("nn.PixelShuffle")
def _pixel_shuffle(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return torch.nn.PixelShuffle(ctx.integer(m, "upscaleFactor", minimum=1))


_PADS = {"nn.SpatialZeroPadding": torch.nn.ZeroPad2d, "nn.SpatialReflectionPadding": torch.nn.ReflectionPad2d,
         "nn.SpatialReplicationPadding": torch.nn.ReplicationPad2d}


@converter(*_PADS)
def _spatial_padding(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return _PADS[m._typename()](tuple(ctx.integer(m, f) for f in ("pad_l", "pad_r", "pad_t", "pad_b")))


@converter("nn.VolumetricReplicationPadding")
def _volumetric_padding(m: LuaObject, ctx: Context) -> torch.nn.Module:
    fields = ("pleft", "pright", "ptop", "pbottom", "pfront", "pback")
    return torch.nn.ReplicationPad3d(tuple(ctx.integer(m, f) for f in fields))


@converter("nn.Padding")
def _padding(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return layers.Padding(ctx.integer(m, "dim"), ctx.integer(m, "pad"), _input_dims(m, ctx, "nInputDim"),
                          ctx.number(m, "value"), ctx.integer(m, "index"))


# ---- shape layers

def _input_dims(m: LuaObject, ctx: Context, name: str = "numInputDims") -> int | None:
    """The optional count of non-batch dimensions (numInputDims, nInputDims, ...)."""
    return ctx.integer(m, name, None)


@converter("nn.View")
def _view(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return layers.View(ctx.sizes(m, "size"), _input_dims(m, ctx))


@converter("nn.Reshape")
def _reshape(m: LuaObject, ctx: Context) -> torch.nn.Module:
    batch_mode = ctx.raw(m, "batchMode")
    return layers.Reshape(ctx.sizes(m, "size"), None if batch_mode is None else batch_mode is not False)


@converter("nn.Transpose")
def _transpose(m: LuaObject, ctx: Context) -> torch.nn.Module:
    pairs = ctx.raw(m, "permutations")
    if not is_plain_table(pairs):
        raise ctx.bad(m, "permutations", f"is {describe(pairs)}, expected a table of dimension pairs")
    swaps = []
    for i in range(1, len(pairs) + 1):
        pair = [pairs[i][j] if is_plain_table(pairs[i]) else None for j in (1, 2)]
        if not all(is_number(d) and float(d).is_integer() and d >= 1 for d in pair):
            raise ctx.bad(m, f"permutations[{i}]", f"is {describe(pairs[i])}, expected a pair of dimensions")
        swaps.append((int(pair[0]) - 1, int(pair[1]) - 1))
    return layers.Transpose(swaps, _input_dims(m, ctx))


@converter("nn.Squeeze")
def _squeeze(m: LuaObject, ctx: Context) -> torch.nn.Module:
    dim = ctx.integer(m, "dim", None)
    return layers.Squeeze(None if dim is None else dim - 1, _input_dims(m, ctx))


@converter("nn.Unsqueeze")
def _unsqueeze(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return layers.Unsqueeze(ctx.integer(m, "pos") - 1, _input_dims(m, ctx))


@converter("nn.Replicate")
def _replicate(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return layers.Replicate(ctx.integer(m, "nfeatures", minimum=0), ctx.integer(m, "dim") - 1,
                            _input_dims(m, ctx, "ndim"))


@converter("nn.Narrow")
def _narrow(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return layers.Narrow(*(ctx.integer(m, f) for f in ("dimension", "index", "length")))


@converter("nn.Select")
def _select(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return layers.Select(ctx.integer(m, "dimension"), ctx.integer(m, "index"))


@converter("nn.Sum", "nn.Mean")
def _sum(m: LuaObject, ctx: Context) -> torch.nn.Module:
    op = "mean" if ctx.flag(m, "sizeAverage") else "sum"
    return layers.Reduce(op, ctx.integer(m, "dimension"), _input_dims(m, ctx, "nInputDims"),
                         squeeze=ctx.flag(m, "squeeze", True))


@converter("nn.Max", "nn.Min")
def _max(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return layers.Reduce(m._typename()[3:].lower(), ctx.integer(m, "dimension"), _input_dims(m, ctx, "nInputDims"))


@converter("nn.Collapse")
def _collapse(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return layers.Collapse(ctx.integer(m, "nInputDim"))


@converter("nn.Identity")
def _identity(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return torch.nn.Identity()


@converter("nn.Contiguous")
def _contiguous(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return layers.Contiguous()


@converter("nn.Copy")
def _copy(m: LuaObject, ctx: Context) -> torch.nn.Module:
    output = ctx.raw(m, "output")
    if not bridge().lua.globals().torch.isTensor(output):
        raise ctx.bad(m, "output", f"is {describe(output)}, expected a tensor of the type it copies to")
    return layers.Cast(tensor(output).dtype)


# ---- containers

@converter("nn.Sequential", "nn.Maxout")
def _sequential(m: LuaObject, ctx: Context) -> torch.nn.Module:
    """Children named by torch7's 1-based index, as LuaModule names them (`"3.2.bias"`)."""
    out = torch.nn.Sequential()
    for i, child in enumerate(ctx.children(ctx.modules(m)), start=1):
        out.add_module(str(i), child)
    return out


@converter("nn.Decorator", "nn.Profile", "nn.NaN", "nn.DataParallelTable")
def _decorator(m: LuaObject, ctx: Context) -> torch.nn.Module:
    """Decorators computing as the module they wrap (nn.Profile times it, nn.NaN checks it,
    DataParallelTable spreads it over GPUs): that module, one level down (named "1") so that
    paths and names stay torch7's."""
    return _sequential(m, ctx)


@converter("nn.Concat", "nn.DepthConcat")
def _concat(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return layers.Concat(ctx.integer(m, "dimension") - 1, ctx.children(ctx.modules(m)),
                         centered=m._typename() == "nn.DepthConcat")


@converter("nn.Parallel")
def _parallel(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return layers.Parallel(ctx.integer(m, "inputDimension") - 1, ctx.integer(m, "outputDimension") - 1,
                           ctx.children(ctx.modules(m)))
