"""nn ops: each runs a Lua nn module (softmax, relu, tanh, linear, pad, conv2d, max_pool,
avg_pool, batch_normalization) or criterion (mean_sparse_softmax_cross_entropy_with_logits,
with 0-based labels) through the executor's closures; the weights are graph variables
(`<name>_weight`, `<name>_bias`, ...). Layout NCHW; attributes as tinyflow's: ksize and strides
[1, h, w, 1], padding 'SAME' ((k - 1) // 2 each side) or 'VALID'. flatten_layer is a copy."""
from __future__ import annotations

from ..registry import NNCompute, Op, parse_bool, parse_int, parse_tuple
from ..symbol import Node
from ._util import fmt_shape, kernel, make, register_all, same_shape
from .second_order import linear_second, relu_second, softmax_second, tanh_second


def _module(op: str, **kw) -> NNCompute:
    """The op's nn module, built by lua/luabridge/graph/ops/nn.lua's function of that name."""
    return NNCompute(f"require('luabridge.graph.ops.nn').{op}", **kw)


def _with_bias(default: bool = True):
    """num_inputs / input_names of an op with a weight and an optional bias (no_bias: True by
    default, as tinyflow's)."""
    def num(attrs: dict) -> int:
        return 2 if parse_bool(attrs.get("no_bias"), default) else 3

    def names(attrs: dict) -> list:
        return ["data", "weight", "bias"][:num(attrs)]
    return num, names


def _need(shape, ndim: int, what: str, op: str) -> None:
    if len(shape) != ndim:
        raise ValueError(f"{op}: {what} must be {ndim}-D, got {fmt_shape(shape)}")


# ---- activations ----
for _name, _second in (("softmax", softmax_second), ("relu", relu_second), ("tanh", tanh_second)):
    register_all(Op(_name, infer_shape=same_shape,
                    compute=_module(_name, need_outputs=True, backward_gradient=_second)))


# ---- linear ----
def _linear_shape(attrs: dict, ins: list, outs: list = (None,)) -> tuple:
    data, weight = ins[0], ins[1]
    hidden = parse_int(attrs.get("num_hidden"), 0)
    if data is None:
        return ins, [None]
    _need(data, 2, "data", "linear")
    if hidden:
        weight_shape = (hidden, data[1])
    elif weight is not None:
        weight_shape = weight
    else:
        return ins, [None]
    if weight_shape[1] != data[1]:
        raise ValueError(f"linear: weight {fmt_shape(weight_shape)} does not take {data[1]} inputs")
    new = [data, weight_shape] + ([(weight_shape[0],)] if len(ins) > 2 else [])
    return new, [(data[0], weight_shape[0])]


_num, _names = _with_bias()
register_all(Op("linear", num_inputs=_num, input_names=_names, infer_shape=_linear_shape,
                compute=_module("linear", backward_gradient=linear_second)))


# ---- pad ----
def _pad_shape(attrs: dict, ins: list, outs: list = (None,)) -> tuple:
    if ins[0] is None:
        return ins, [None]
    dim, pad = parse_int(attrs.get("dim"), 0), parse_int(attrs.get("pad"), 0)
    if not 0 <= dim < len(ins[0]):
        raise ValueError(f"pad: dim {dim} out of range for {fmt_shape(ins[0])}")
    out = list(ins[0])
    out[dim] += abs(pad)
    return ins, [tuple(out)]


register_all(Op("pad", infer_shape=_pad_shape, compute=_module("pad")))


# ---- convolution and pooling ----
def _window(attrs: dict, key: str, op: str) -> tuple:
    """(h, w) of a [1, h, w, 1] attribute."""
    t = parse_tuple(attrs.get(key), (1, 1, 1, 1))
    if len(t) != 4 or t[0] != 1 or t[3] != 1 or min(t) < 1:
        raise ValueError(f"{op}: {key} must be [1, h, w, 1] with h, w >= 1, got {list(t)}")
    return t[1], t[2]


def conv_pool_params(attrs: dict, op: str) -> tuple:
    """((kh, kw), (sh, sw), same_padding)"""
    if attrs.get("data_format", "NCHW") != "NCHW":
        raise ValueError(f"{op}: only data_format 'NCHW' is supported, got {attrs['data_format']!r}")
    padding = attrs.get("padding", "SAME")
    if padding not in ("SAME", "VALID"):
        raise ValueError(f"{op}: padding must be 'SAME' or 'VALID', got {padding!r}")
    return _window(attrs, "ksize", op), _window(attrs, "strides", op), padding == "SAME"


def _spatial_out(op: str, data: tuple, k: tuple, s: tuple, same: bool) -> tuple:
    pads = [(kk - 1) // 2 if same else 0 for kk in k]
    hw = [(data[2 + i] + 2 * pads[i] - k[i]) // s[i] + 1 for i in range(2)]
    if min(data[2 + i] + 2 * pads[i] - k[i] for i in range(2)) < 0:
        raise ValueError(f"{op}: window {k[0]}x{k[1]} larger than the input {fmt_shape(data)}"
                         f"{' padded' if same else ''}")
    return hw[0], hw[1]


def _conv_shape(attrs: dict, ins: list, outs: list = (None,)) -> tuple:
    data = ins[0]
    (kh, kw), strides, same = conv_pool_params(attrs, "conv2d")
    if data is None:
        return ins, [None]
    _need(data, 4, "data", "conv2d")
    filters = parse_int(attrs.get("num_filter"), 0)
    if filters:
        weight = (filters, data[1], kh, kw)
    elif ins[1] is not None:
        weight = ins[1]
        _need(weight, 4, "weight", "conv2d")
    else:
        return ins, [None]
    if weight[1] != data[1]:
        raise ValueError(f"conv2d: weight {fmt_shape(weight)} takes {weight[1]} channels, "
                         f"data {fmt_shape(data)} has {data[1]}")
    h, w = _spatial_out("conv2d", data, weight[2:], strides, same)
    new = [data, weight] + ([(weight[0],)] if len(ins) > 2 else [])
    return new, [(data[0], weight[0], h, w)]


def _pool_shape(op: str):
    def infer(attrs: dict, ins: list, outs: list = (None,)) -> tuple:
        k, strides, same = conv_pool_params(attrs, op)
        if ins[0] is None:
            return ins, [None]
        _need(ins[0], 4, "data", op)
        h, w = _spatial_out(op, ins[0], k, strides, same)
        return ins, [(ins[0][0], ins[0][1], h, w)]
    return infer


_num, _names = _with_bias()
register_all(Op("conv2d", num_inputs=_num, input_names=_names, infer_shape=_conv_shape,
                compute=_module("conv2d", need_outputs=False)))
register_all(Op("max_pool", infer_shape=_pool_shape("max_pool"), compute=_module("max_pool")))
register_all(Op("avg_pool", infer_shape=_pool_shape("avg_pool"), compute=_module("avg_pool")))


# ---- batch normalization ----
def _bn_shape(attrs: dict, ins: list, outs: list = (None,)) -> tuple:
    data = ins[0]
    if data is None:
        return ins, [None]
    if len(data) not in (2, 4):
        raise ValueError(f"batch_normalization: data must be 2-D or 4-D (NCHW), got {fmt_shape(data)}")
    return [data, (data[1],), (data[1],)], [data]


# batch statistics (training mode, as tinyflow); the running averages stay in the module
register_all(Op("batch_normalization", num_inputs=3, input_names=("data", "gamma", "beta"),
                infer_shape=_bn_shape, compute=_module("batch_normalization")))


# ---- the criterion ----
def _xent_shape(attrs: dict, ins: list, outs: list = (None,)) -> tuple:
    logits, label = ins
    if logits is None:
        return ins, [(1,)]
    _need(logits, 2, "logits", "mean_sparse_softmax_cross_entropy_with_logits")
    if label is not None and label != (logits[0],):
        raise ValueError(f"mean_sparse_softmax_cross_entropy_with_logits: labels {fmt_shape(label)} "
                         f"for logits {fmt_shape(logits)} (one 0-based class per row)")
    return [logits, (logits[0],)], [(1,)]


# CrossEntropyCriterion (mean over the batch) on 0-based labels
register_all(Op("mean_sparse_softmax_cross_entropy_with_logits", num_inputs=2,
                input_names=("data", "label"), infer_shape=_xent_shape, hint="cross_entropy",
                compute=_module("mean_sparse_softmax_cross_entropy_with_logits", criterion=True,
                                need_outputs=False)))


# ---- flatten ----
def _flatten_shape(attrs: dict, ins: list, outs: list = (None,)) -> tuple:
    if ins[0] is None:
        return ins, [None]
    if not ins[0]:
        raise ValueError("flatten_layer: the data has no dims")
    rest = 1
    for d in ins[0][1:]:
        rest *= d
    return ins, [(ins[0][0], rest)]


def _flatten_grad(node: Node, og: list) -> list:
    return [make("_flatten_backward", [og[0]], name=f"{node.name}_backward", forward=node)]


register_all(Op("flatten_layer", infer_shape=_flatten_shape, gradient=_flatten_grad, inplace=[(0, 0)],
                hint="flatten", compute=kernel("K.ewise('copy', y[1], x)")))
register_all(Op("_flatten_backward", is_backward=True, inplace=[(0, 0)],
                gradient=lambda node, og: [make("flatten_layer", [og[0]], name=f"{node.name}_grad")],
                compute=kernel("K.ewise('copy', y[1], x)")))
