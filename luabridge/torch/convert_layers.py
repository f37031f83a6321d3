"""Converters of torch7's simple layers, convolutions, pooling, normalization, dropout, padding,
shape layers and containers (table layers and criterions: convert_tables, convert_criterions).
PyTorch's own module where it computes the same; else one of `layers`."""
from __future__ import annotations

from typing import Any

import torch

from ..proxy import LuaObject, wrap
from . import layers
from .convert import Context, converter, tensor


def _get(m: LuaObject, name: str, default: Any = None) -> Any:
    """A field of the Lua module (raw Lua values; nil -> default)."""
    value = m._lua[name]
    return default if value is None else value


def _dtype(m: LuaObject) -> torch.dtype:
    return tensor(m.weight).dtype


def _set(module: torch.nn.Module, m: LuaObject, *names: str) -> torch.nn.Module:
    """Copies the Lua module's tensors `names` (those it has) into module's, reshaped to them."""
    with torch.no_grad():
        for name in names:
            if m._lua[name] is not None:
                target = getattr(module, name)
                target.copy_(tensor(m._lua[name]).reshape(target.shape))
    return module


def _ints(m: LuaObject, prefix: str, dims: str, default: int | None = None) -> tuple[int, ...]:
    """The per-dim fields prefix + T/H/W, in PyTorch's order (e.g. kH, kW)."""
    return tuple(int(_get(m, prefix + d, default)) for d in dims)


def _inplace(m: LuaObject) -> bool:
    return bool(_get(m, "inplace", False))


# ---- linear and convolutions

@converter("nn.Linear")
def _linear(m: LuaObject, ctx: Context) -> torch.nn.Module:
    weight = tensor(m.weight)
    module = torch.nn.Linear(weight.shape[1], weight.shape[0], bias=m._lua["bias"] is not None, dtype=weight.dtype)
    return _set(module, m, "weight", "bias")


@converter("nn.LinearWeightNorm")
def _linear_weight_norm(m: LuaObject, ctx: Context) -> torch.nn.Module:
    """A Linear under PyTorch's weight_norm: g and v are its parameters, as in torch7."""
    v = tensor(m.v)
    module = torch.nn.Linear(v.shape[1], v.shape[0], bias=m._lua["bias"] is not None, dtype=v.dtype)
    _set(module, m, "bias")
    module = torch.nn.utils.parametrizations.weight_norm(module, "weight", dim=0)
    with torch.no_grad():
        module.parametrizations.weight.original0.copy_(tensor(m.g))
        module.parametrizations.weight.original1.copy_(v)
    return module


@converter("nn.Bilinear")
def _bilinear(m: LuaObject, ctx: Context) -> torch.nn.Module:
    weight = tensor(m.weight)
    out, in1, in2 = weight.shape
    return _set(layers.Bilinear(in1, in2, out, bias=m._lua["bias"] is not None, dtype=weight.dtype), m, "weight", "bias")


def _conv(m: LuaObject, dims: str, transposed: bool) -> torch.nn.Module:
    cls = {(2, False): torch.nn.Conv2d, (3, False): torch.nn.Conv3d,
           (2, True): layers.FullConvolution, (3, True): layers.VolumetricFullConvolution}[len(dims), transposed]
    options = dict(stride=_ints(m, "d", dims, 1), padding=_ints(m, "pad", dims, 0),
                   dilation=_ints(m, "dilation", dims, 1), groups=int(_get(m, "groups", 1)),
                   bias=m._lua["bias"] is not None, dtype=_dtype(m))
    if transposed:
        options["output_padding"] = _ints(m, "adj", dims, 0)
    module = cls(int(m.nInputPlane), int(m.nOutputPlane), _ints(m, "k", dims), **options)
    return _set(module, m, "weight", "bias")


@converter("nn.SpatialConvolution", "nn.SpatialConvolutionMM", "nn.SpatialDilatedConvolution",
           "cudnn.SpatialConvolution")
def _spatial_conv(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return _conv(m, "HW", transposed=False)


@converter("nn.SpatialFullConvolution", "cudnn.SpatialFullConvolution")
def _spatial_full_conv(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return _conv(m, "HW", transposed=True)


@converter("nn.VolumetricConvolution", "nn.VolumetricDilatedConvolution", "cudnn.VolumetricConvolution")
def _volumetric_conv(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return _conv(m, "THW", transposed=False)


@converter("nn.VolumetricFullConvolution", "cudnn.VolumetricFullConvolution")
def _volumetric_full_conv(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return _conv(m, "THW", transposed=True)


@converter("nn.TemporalConvolution", "cudnn.TemporalConvolution")
def _temporal_conv(m: LuaObject, ctx: Context) -> torch.nn.Module:
    frame, out, k = int(m.inputFrameSize), int(m.outputFrameSize), int(m.kW)
    module = layers.TemporalConvolution(frame, out, k, stride=int(m.dW), padding=int(_get(m, "padH", 0)),
                                        dtype=_dtype(m))
    with torch.no_grad():   # torch7 lays a window out frame after frame: out x (k * frame)
        module.weight.copy_(tensor(m.weight).reshape(out, k, frame).transpose(1, 2))
        module.bias.copy_(tensor(m.bias))
    return module


@converter("nn.SpatialDepthWiseConvolution")
def _depthwise_conv(m: LuaObject, ctx: Context) -> torch.nn.Module:
    """Output plane i * multiplier + j is input plane i through filter j (torch7 keeps the filters
    as multiplier x planes)."""
    planes, multiplier = int(m.nInputPlane), int(m.nOutputPlane)
    kernel = _ints(m, "k", "HW")
    module = torch.nn.Conv2d(planes, planes * multiplier, kernel, _ints(m, "d", "HW"), _ints(m, "pad", "HW", 0),
                             groups=planes, bias=m._lua["bias"] is not None, dtype=_dtype(m))
    with torch.no_grad():
        module.weight.copy_(tensor(m.weight).reshape(multiplier, planes, *kernel).transpose(0, 1)
                            .reshape(module.weight.shape))
        if module.bias is not None:
            module.bias.copy_(tensor(m.bias).reshape(multiplier, planes).t().reshape(-1))
    return module


_RECURRENT = {"CUDNN_LSTM": (layers.LSTM, 4, {}), "CUDNN_GRU": (layers.GRU, 3, {}),
              "CUDNN_RNN_TANH": (layers.RNN, 1, {"nonlinearity": "tanh"}),
              "CUDNN_RNN_RELU": (layers.RNN, 1, {"nonlinearity": "relu"})}


@converter("cudnn.RNN", "cudnn.LSTM", "cudnn.GRU", "cudnn.RNNTanh", "cudnn.RNNReLU", "cudnn.BLSTM", "cudnn.BGRU")
def _recurrent(m: LuaObject, ctx: Context) -> torch.nn.Module:
    """cuDNN's flat weight holds, per layer and direction in turn, the gates' input matrices, their
    recurrent ones, the input biases and the recurrent biases: PyTorch's weight_ih, weight_hh,
    bias_ih and bias_hh, whose gates come in cuDNN's order."""
    if _get(m, "rememberStates"):
        raise ctx.fail(m, "carries its hidden state from call to call (rememberStates), which PyTorch's "
                          "recurrent modules do not")
    if m._lua["hiddenInput"] is not None or m._lua["cellInput"] is not None:
        raise ctx.fail(m, "starts from a given hiddenInput / cellInput")
    cls, gates, options = _RECURRENT[m.mode]
    inputs, hidden, depth, directions = int(m.inputSize), int(m.hiddenSize), int(m.numLayers), int(m.numDirections)
    flat = tensor(m.weight)
    module = cls(inputs, hidden, depth, batch_first=bool(_get(m, "batchFirst", False)),
                 dropout=float(m.dropout) if depth > 1 else 0.0, bidirectional=directions == 2,
                 dtype=flat.dtype, **options)
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
    return layers.TemporalMaxPooling(int(m.kW), int(m.dW))


def _max_pool(m: LuaObject, cls: type, dims: str) -> torch.nn.Module:
    return cls(_ints(m, "k", dims), _ints(m, "d", dims), _ints(m, "pad", dims, 0), _ints(m, "dilation", dims, 1),
               ceil_mode=bool(_get(m, "ceil_mode", False)))


@converter("nn.SpatialMaxPooling", "nn.SpatialDilatedMaxPooling", "cudnn.SpatialMaxPooling")
def _spatial_max_pool(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return _max_pool(m, torch.nn.MaxPool2d, "HW")


@converter("nn.VolumetricMaxPooling", "nn.VolumetricDilatedMaxPooling", "cudnn.VolumetricMaxPooling")
def _volumetric_max_pool(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return _max_pool(m, torch.nn.MaxPool3d, "THW")


def _avg_pool(m: LuaObject, ctx: Context, cls: type, dims: str) -> torch.nn.Module:
    if _get(m, "divide") is False:   # torch7's oldest files: sums (kept as a ConversionError)
        raise ctx.fail(m, "sums its windows (divide = false), which PyTorch's pooling does not")
    return cls(_ints(m, "k", dims), _ints(m, "d", dims), _ints(m, "pad", dims, 0),
               ceil_mode=bool(_get(m, "ceil_mode", False)),
               count_include_pad=_get(m, "count_include_pad", True) is not False)


@converter("nn.SpatialAveragePooling", "cudnn.SpatialAveragePooling")
def _spatial_avg_pool(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return _avg_pool(m, ctx, torch.nn.AvgPool2d, "HW")


@converter("nn.VolumetricAveragePooling", "cudnn.VolumetricAveragePooling")
def _volumetric_avg_pool(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return _avg_pool(m, ctx, torch.nn.AvgPool3d, "THW")


@converter("nn.SpatialAdaptiveMaxPooling")
def _adaptive_max_pool(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return torch.nn.AdaptiveMaxPool2d((int(m.H), int(m.W)))


@converter("nn.SpatialAdaptiveAveragePooling")
def _adaptive_avg_pool(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return torch.nn.AdaptiveAvgPool2d((int(m.H), int(m.W)))


@converter("nn.SpatialLPPooling")
def _lp_pool(m: LuaObject, ctx: Context) -> torch.nn.Module:
    """torch7 builds it as a Sequential of x^p, window sums and the 1/p power: PyTorch's LPPool2d."""
    power = m.get(1)
    p = 2.0 if power._typename() == "nn.Square" else float(power.pow)
    return torch.nn.LPPool2d(p, _ints(m, "k", "HW"), _ints(m, "d", "HW"))


# ---- normalization, dropout

_BATCH_NORMS = {"nn.BatchNormalization": layers.BatchNorm1d, "nn.SpatialBatchNormalization": layers.BatchNorm2d,
                "nn.VolumetricBatchNormalization": layers.BatchNorm3d}


@converter(*_BATCH_NORMS, *(name.replace("nn.", "cudnn.") for name in _BATCH_NORMS))
def _batch_norm(m: LuaObject, ctx: Context) -> torch.nn.Module:
    cls = _BATCH_NORMS[m._typename().replace("cudnn.", "nn.")]
    mean = tensor(m.running_mean)
    module = cls(mean.numel(), eps=float(m.eps), momentum=float(m.momentum),
                 affine=m._lua["weight"] is not None, dtype=mean.dtype)
    return _set(module, m, "weight", "bias", "running_mean", "running_var")


@converter("nn.Dropout")
def _dropout(m: LuaObject, ctx: Context) -> torch.nn.Module:
    p, v2, stochastic = float(m.p), _get(m, "v2") is not False, bool(_get(m, "stochastic_inference", False))
    if v2 and not stochastic:
        return torch.nn.Dropout(p, inplace=_inplace(m))
    return layers.Dropout(p, scaled=v2, stochastic=stochastic)


@converter("nn.SpatialDropout", "nn.VolumetricDropout")
def _plane_dropout(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return layers.Dropout(float(m.p), scaled=False, plane_dims=int(m.planeDims),
                          stochastic=bool(_get(m, "stochastic_inference", False)))


@converter("nn.Normalize")
def _normalize(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return layers.Normalize(float(m.p), float(m.eps))


@converter("nn.SpatialCrossMapLRN", "cudnn.SpatialCrossMapLRN")
def _lrn(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return torch.nn.LocalResponseNorm(int(m.size), float(m.alpha), float(m.beta), float(m.k))


# ---- activations and elementwise layers

def _hardtanh(m: LuaObject) -> torch.nn.Module:
    return torch.nn.Hardtanh(float(m.min_val), float(m.max_val), _inplace(m))


def _cudnn_softmax(m: LuaObject) -> torch.nn.Module:
    """cudnn.SpatialSoftMax in the mode and algorithm its fields name."""
    instance = _get(m, "mode") == "CUDNN_SOFTMAX_MODE_INSTANCE"
    return layers.SoftMax(log=_get(m, "algorithm") == "CUDNN_SOFTMAX_LOG", over="instance" if instance else "planes")


def _simple(name: str, make: Any) -> None:
    """Registers a converter for a layer whose PyTorch module `make(m)` builds from its fields."""
    converter(name)(lambda m, ctx: make(m))


for _name, _make in {
    "nn.Tanh": lambda m: torch.nn.Tanh(), "cudnn.Tanh": lambda m: torch.nn.Tanh(),
    "nn.Sigmoid": lambda m: torch.nn.Sigmoid(), "cudnn.Sigmoid": lambda m: torch.nn.Sigmoid(),
    "nn.ReLU": lambda m: torch.nn.ReLU(_inplace(m)), "cudnn.ReLU": lambda m: torch.nn.ReLU(_inplace(m)),
    "nn.Threshold": lambda m: torch.nn.Threshold(float(m.threshold), float(m.val), _inplace(m)),
    "nn.HardTanh": _hardtanh, "nn.Clamp": _hardtanh, "cudnn.ClippedReLU": _hardtanh,
    "nn.ReLU6": lambda m: torch.nn.ReLU6(_inplace(m)),
    "nn.LeakyReLU": lambda m: torch.nn.LeakyReLU(float(m.negval), _inplace(m)),
    "nn.ELU": lambda m: torch.nn.ELU(float(m.alpha), _inplace(m)),
    "nn.RReLU": lambda m: torch.nn.RReLU(float(m.lower), float(m.upper), _inplace(m)),
    "nn.SoftPlus": lambda m: torch.nn.Softplus(float(m.beta), float(m.threshold)),
    "nn.SoftSign": lambda m: torch.nn.Softsign(), "nn.LogSigmoid": lambda m: torch.nn.LogSigmoid(),
    "nn.TanhShrink": lambda m: torch.nn.Tanhshrink(),
    "nn.SoftShrink": lambda m: torch.nn.Softshrink(float(_get(m, "lambda"))),
    "nn.HardShrink": lambda m: torch.nn.Hardshrink(float(_get(m, "lambda"))),
    "nn.Exp": lambda m: layers.Pointwise("exp"), "nn.Log": lambda m: layers.Pointwise("log"),
    "nn.Abs": lambda m: layers.Pointwise("abs"), "nn.Square": lambda m: layers.Pointwise("square"),
    "nn.Sqrt": lambda m: layers.Pointwise("sqrt", float(_get(m, "eps", 0))),
    "nn.Power": lambda m: layers.Pointwise("pow", float(m.pow)),
    "nn.MulConstant": lambda m: layers.Pointwise("mul", float(m.constant_scalar)),
    "nn.AddConstant": lambda m: layers.Pointwise("add", float(m.constant_scalar)),
    "nn.SoftMax": lambda m: layers.SoftMax(), "nn.LogSoftMax": lambda m: layers.SoftMax(log=True),
    "nn.SoftMin": lambda m: layers.SoftMax(negate=True),
    "nn.SpatialSoftMax": lambda m: layers.SoftMax(), "nn.SpatialLogSoftMax": lambda m: layers.SoftMax(log=True),
    "cudnn.SpatialSoftMax": _cudnn_softmax, "cudnn.SpatialLogSoftMax": _cudnn_softmax,
    "cudnn.SoftMax": lambda m: layers.SoftMax(over="instance"),
    "cudnn.LogSoftMax": lambda m: layers.SoftMax(log=True, over="instance"),
    "cudnn.VolumetricSoftMax": lambda m: layers.SoftMax(over="volume"),
    "cudnn.VolumetricLogSoftMax": lambda m: layers.SoftMax(log=True, over="volume"),
}.items():
    _simple(_name, _make)


@converter("nn.GatedLinearUnit")
def _glu(m: LuaObject, ctx: Context) -> torch.nn.Module:
    dim = _get(m, "dim")
    return torch.nn.GLU(-1 if dim is None else int(dim) - 1)


@converter("nn.CReLU")
def _crelu(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return layers.CReLU(int(m.nInputDims))


@converter("nn.GradientReversal")
def _gradient_reversal(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return layers.GradientScale(-float(_get(m, "lambda")))


@converter("nn.ZeroGrad")
def _zero_grad(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return layers.GradientScale(0.0)


@converter("nn.PReLU")
def _prelu(m: LuaObject, ctx: Context) -> torch.nn.Module:
    weight = tensor(m.weight)
    return _set(layers.PReLU(weight.numel(), dtype=weight.dtype), m, "weight")


@converter("nn.CMul", "nn.Mul")
def _cmul(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return layers.Broadcast("weight", tensor(m.weight), multiply=True, scalar=m._typename() == "nn.Mul")


@converter("nn.CAdd", "nn.Add")
def _cadd(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return layers.Broadcast("bias", tensor(m.bias), multiply=False, scalar=bool(_get(m, "scalar", False)))


@converter("nn.LookupTable")
def _lookup_table(m: LuaObject, ctx: Context) -> torch.nn.Module:
    weight = tensor(m.weight)
    padding = int(_get(m, "paddingValue", 0))
    max_norm = _get(m, "maxNorm")
    module = layers.LookupTable(*weight.shape, padding_idx=padding - 1 if padding > 0 else None,
                                max_norm=None if max_norm is None else float(max_norm),
                                norm_type=float(_get(m, "normType", 2)),
                                scale_grad_by_freq=bool(_get(m, "shouldScaleGradByFreq", False)), dtype=weight.dtype)
    return _set(module, m, "weight")


# ---- resampling and padding

@converter("nn.SpatialUpSamplingNearest")
def _upsample_nearest(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return layers.Upsample(scale_factor=float(m.scale_factor), mode="nearest")


@converter("nn.SpatialUpSamplingBilinear")
def _upsample_bilinear(m: LuaObject, ctx: Context) -> torch.nn.Module:
    scale = _get(m, "scale_factor")
    if scale is None:
        return layers.Upsample(size=(int(m.oheight), int(m.owidth)), mode="bilinear", align_corners=True)
    return layers.Upsample(scale_factor=float(scale), mode="bilinear", align_corners=True)


@converter("nn.UpSampling")
def _upsampling(m: LuaObject, ctx: Context) -> torch.nn.Module:
    scale = _get(m, "scale_factor")
    sizes = [_get(m, f) for f in ("odepth", "oheight", "owidth")]
    return layers.Resample(None if scale is None else float(scale), sizes, linear=m.mode == "linear")


@converter("nn.PixelShuffle")
def _pixel_shuffle(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return torch.nn.PixelShuffle(int(m.upscaleFactor))


_PADS = {"nn.SpatialZeroPadding": torch.nn.ZeroPad2d, "nn.SpatialReflectionPadding": torch.nn.ReflectionPad2d,
         "nn.SpatialReplicationPadding": torch.nn.ReplicationPad2d}


@converter(*_PADS)
def _spatial_padding(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return _PADS[m._typename()](tuple(int(_get(m, f)) for f in ("pad_l", "pad_r", "pad_t", "pad_b")))


@converter("nn.VolumetricReplicationPadding")
def _volumetric_padding(m: LuaObject, ctx: Context) -> torch.nn.Module:
    fields = ("pleft", "pright", "ptop", "pbottom", "pfront", "pback")
    return torch.nn.ReplicationPad3d(tuple(int(_get(m, f)) for f in fields))


@converter("nn.Padding")
def _padding(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return layers.Padding(int(m.dim), int(m.pad), _get(m, "nInputDim"), float(m.value), int(m.index))


# ---- shape layers

def _sizes(m: LuaObject) -> list[int]:
    return [int(s) for s in wrap(m._lua["size"]).tolist()]


@converter("nn.View")
def _view(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return layers.View(_sizes(m), _get(m, "numInputDims"))


@converter("nn.Reshape")
def _reshape(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return layers.Reshape(_sizes(m), _get(m, "batchMode"))


@converter("nn.Transpose")
def _transpose(m: LuaObject, ctx: Context) -> torch.nn.Module:
    swaps = [(int(p[1]) - 1, int(p[2]) - 1) for p in m._lua["permutations"].values()]
    return layers.Transpose(swaps, _get(m, "numInputDims"))


@converter("nn.Squeeze")
def _squeeze(m: LuaObject, ctx: Context) -> torch.nn.Module:
    dim = _get(m, "dim")
    return layers.Squeeze(None if dim is None else int(dim) - 1, _get(m, "numInputDims"))


@converter("nn.Unsqueeze")
def _unsqueeze(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return layers.Unsqueeze(int(m.pos) - 1, _get(m, "numInputDims"))


@converter("nn.Replicate")
def _replicate(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return layers.Replicate(int(m.nfeatures), int(m.dim) - 1, _get(m, "ndim"))


@converter("nn.Narrow")
def _narrow(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return layers.Narrow(int(m.dimension), int(m.index), int(m.length))


@converter("nn.Select")
def _select(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return layers.Select(int(m.dimension), int(m.index))


@converter("nn.Sum", "nn.Mean")
def _sum(m: LuaObject, ctx: Context) -> torch.nn.Module:
    op = "mean" if _get(m, "sizeAverage", False) else "sum"
    return layers.Reduce(op, int(m.dimension), _get(m, "nInputDims"), squeeze=_get(m, "squeeze", True) is not False)


@converter("nn.Max", "nn.Min")
def _max(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return layers.Reduce(m._typename()[3:].lower(), int(m.dimension), _get(m, "nInputDims"))


@converter("nn.Collapse")
def _collapse(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return layers.Collapse(int(m.nInputDim))


@converter("nn.Identity")
def _identity(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return torch.nn.Identity()


@converter("nn.Contiguous")
def _contiguous(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return layers.Contiguous()


@converter("nn.Copy")
def _copy(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return layers.Cast(tensor(m.output).dtype)


# ---- containers

@converter("nn.Sequential", "nn.Maxout")
def _sequential(m: LuaObject, ctx: Context) -> torch.nn.Module:
    """Children named by torch7's 1-based index, as LuaModule names them (`"3.2.bias"`)."""
    out = torch.nn.Sequential()
    for i, child in enumerate(ctx.children(m.modules), start=1):
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
    return layers.Concat(int(m.dimension) - 1, ctx.children(m.modules), centered=m._typename() == "nn.DepthConcat")


@converter("nn.Parallel")
def _parallel(m: LuaObject, ctx: Context) -> torch.nn.Module:
    return layers.Parallel(int(m.inputDimension) - 1, int(m.outputDimension) - 1, ctx.children(m.modules))
