"""An evaluation-mode forward of an nn model as luabridge.t7.read gives it (TorchObjects of fields),
computed by PyTorch in float64: a reference for tools/famous_models.py, independent of the Lua
side except for the weights in the file. It knows the classes of the famous models it checks
(OpenFace nn4.small2, fast-neural-style's transform nets); forward raises Unsupported for others.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

# containers that run their children in order (dpnn's Inception holds one DepthConcat;
# SpatialLPPooling is a Sequential of Square, SpatialAveragePooling, MulConstant, Sqrt)
SEQUENTIAL = {"nn.Sequential", "nn.Inception", "nn.SpatialLPPooling"}
IDENTITY = {"nn.TotalVariation", "nn.Identity", "nn.Dropout"}   # no effect on an evaluation forward


class Unsupported(Exception):
    pass


def children(m: Any) -> list:
    mods = m.get("modules")
    return list(mods.values()) if isinstance(mods, dict) else list(mods or [])


def tensor(a: np.ndarray) -> Any:
    import torch
    return torch.from_numpy(np.asarray(a, dtype=np.float64))


def pair(m: Any, w: str, h: str, default: int = 0) -> tuple[int, int]:
    """A module's (H, W) pair of the fields named for W and H (torch7 stores width first)."""
    return int(m.get(h) or default), int(m.get(w) or default)


def depth_concat(m: Any, outs: list) -> Any:
    """Concatenated along `dimension`, each output centred (zero-padded) in the largest size."""
    import torch
    dim = int(m.dimension) - 1
    largest = [max(o.shape[d] for o in outs) for d in range(outs[0].dim())]
    padded = []
    for o in outs:
        spec: list[int] = []
        for d in reversed(range(o.dim())):
            extra = 0 if d == dim else largest[d] - o.shape[d]
            spec += [extra // 2, extra - extra // 2]
        padded.append(torch.nn.functional.pad(o, spec))
    return torch.cat(padded, dim)


def instance_norm(m: Any, x: Any) -> Any:
    """fast-neural-style's InstanceNormalization: its `bn`, a SpatialBatchNormalization in training
    mode, over x viewed as 1 x (N * C) x H x W with the weight and bias repeated N times. torch7's
    nn since August 2017 (and luabridge) takes a batch of one at the running statistics, which
    here stay at their start (mean 0, variance 1): this is what fast_neural_style.lua computes."""
    n, c = x.shape[:2]
    flat = x.reshape(1, n * c, *x.shape[2:])
    mean = tensor(m.bn.running_mean)[None, :, None, None]
    var = tensor(m.bn.running_var)[None, :, None, None]
    y = ((flat - mean) / (var + float(m.bn.eps)).sqrt()).reshape(x.shape)
    return y * tensor(m.weight)[None, :, None, None] + tensor(m.bias)[None, :, None, None]


def batch_norm(m: Any, x: Any) -> Any:
    import torch
    weight = tensor(m.weight) if m.get("weight") is not None else None
    bias = tensor(m.bias) if m.get("bias") is not None else None
    return torch.nn.functional.batch_norm(x, tensor(m.running_mean), tensor(m.running_var), weight, bias,
                                          training=False, eps=float(m.eps))


def view(m: Any, x: Any) -> Any:
    size = [int(s) for s in np.asarray(m.size).ravel()]
    known = int(np.prod([s for s in size if s != -1]))
    batch = x.numel() // known if -1 not in size and x.numel() != known else None
    return x.reshape(batch, *size) if batch else x.reshape(*size)


def _layers() -> dict[str, Callable[[Any, Any], Any]]:
    import torch
    f = torch.nn.functional

    def conv(m: Any, x: Any) -> Any:
        w = tensor(m.weight).reshape(int(m.nOutputPlane), int(m.nInputPlane), int(m.kH), int(m.kW))
        return f.conv2d(x, w, tensor(m.bias), stride=pair(m, "dW", "dH", 1), padding=pair(m, "padW", "padH"))

    def full_conv(m: Any, x: Any) -> Any:
        return f.conv_transpose2d(x, tensor(m.weight), tensor(m.bias), stride=pair(m, "dW", "dH", 1),
                                  padding=pair(m, "padW", "padH"), output_padding=pair(m, "adjW", "adjH"))

    def max_pool(m: Any, x: Any) -> Any:
        return f.max_pool2d(x, pair(m, "kW", "kH"), pair(m, "dW", "dH"), pair(m, "padW", "padH"),
                            ceil_mode=bool(m.get("ceil_mode")))

    def avg_pool(m: Any, x: Any) -> Any:
        y = f.avg_pool2d(x, pair(m, "kW", "kH"), pair(m, "dW", "dH"), pair(m, "padW", "padH"),
                         ceil_mode=bool(m.get("ceil_mode")), count_include_pad=m.get("count_include_pad", True) is not False)
        return y if m.get("divide", True) is not False else y * (int(m.kW) * int(m.kH))

    def normalize(m: Any, x: Any) -> Any:
        p = float(m.p)
        return x / (x.abs().pow(p).sum(dim=-1, keepdim=True) + float(m.eps)).pow(1 / p)

    return {
        "nn.SpatialConvolution": conv, "nn.SpatialConvolutionMM": conv, "nn.SpatialFullConvolution": full_conv,
        "nn.SpatialBatchNormalization": batch_norm, "nn.InstanceNormalization": instance_norm,
        "nn.SpatialMaxPooling": max_pool, "nn.SpatialAveragePooling": avg_pool,
        "nn.SpatialCrossMapLRN": lambda m, x: f.local_response_norm(x, int(m.size), float(m.alpha), float(m.beta),
                                                                    float(m.k)),
        "nn.SpatialReflectionPadding": lambda m, x: f.pad(x, [int(m.pad_l), int(m.pad_r), int(m.pad_t),
                                                              int(m.pad_b)], mode="reflect"),
        "nn.ShaveImage": lambda m, x: x[:, :, int(m.size):x.shape[2] - int(m.size), int(m.size):x.shape[3] - int(m.size)],
        "nn.ReLU": lambda m, x: x.clamp(min=0), "nn.Tanh": lambda m, x: x.tanh(),
        "nn.Square": lambda m, x: x * x, "nn.Sqrt": lambda m, x: x.sqrt(),
        "nn.MulConstant": lambda m, x: x * float(m.constant_scalar),
        "nn.Linear": lambda m, x: f.linear(x, tensor(m.weight), tensor(m.bias) if m.get("bias") is not None else None),
        "nn.View": view, "nn.Normalize": normalize,
        "nn.CAddTable": lambda m, xs: sum(xs[1:], xs[0]),
    }


def forward(module: Any, x: np.ndarray) -> np.ndarray:
    """module's output for x (float64), as an evaluation-mode forward computes it."""
    import torch
    layers = _layers()

    def run(m: Any, v: Any) -> Any:
        name = m.typename
        if name in SEQUENTIAL:
            for child in children(m):
                v = run(child, v)
            return v
        if name == "nn.ConcatTable":
            return [run(child, v) for child in children(m)]
        if name == "nn.DepthConcat":
            return depth_concat(m, [run(child, v) for child in children(m)])
        if name in IDENTITY:
            return v
        if name not in layers:
            raise Unsupported(f"no reference for {name}")
        return layers[name](m, v)

    with torch.no_grad():
        return run(module, tensor(x)).numpy()
