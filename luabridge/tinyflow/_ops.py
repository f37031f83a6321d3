"""The op functions of the front end: `op(*inputs, name=None, **attrs)` as nnvm makes them
(named inputs may be given as symbols by keyword), with tinyflow's positional forms for
zeros, ones, normal, argmax and the reductions."""
from __future__ import annotations

from typing import Any, Optional, Sequence

from ..graph.symbol import Symbol, create

__all__ = ["zeros", "zeros_like", "ones", "ones_like", "normal", "equal", "exp", "log", "sqrt",
           "matmul", "reduce_sum", "reduce_mean", "argmax", "softmax", "relu", "tanh", "linear",
           "pad", "conv2d", "max_pool", "avg_pool", "batch_normalization", "flatten_layer",
           "mean_sparse_softmax_cross_entropy_with_logits", "assign", "add", "sub", "mul", "div",
           "pow"]


def _op(op_name: str):
    def make(*inputs: Symbol, name: Optional[str] = None, **attrs: Any) -> Symbol:
        return create(op_name, *inputs, name=name, **attrs)
    make.__name__ = make.__qualname__ = op_name
    make.__doc__ = f"The graph op {op_name!r}: inputs as symbols, attributes by keyword."
    return make


zeros_like = _op("zeros_like")
ones_like = _op("ones_like")
equal = _op("equal")
exp = _op("exp")
log = _op("log")
sqrt = _op("sqrt")
matmul = _op("matmul")
softmax = _op("softmax")
relu = _op("relu")
tanh = _op("tanh")
linear = _op("linear")
pad = _op("pad")
conv2d = _op("conv2d")
max_pool = _op("max_pool")
avg_pool = _op("avg_pool")
batch_normalization = _op("batch_normalization")
flatten_layer = _op("flatten_layer")
mean_sparse_softmax_cross_entropy_with_logits = _op("mean_sparse_softmax_cross_entropy_with_logits")
assign = _op("assign")
add = _op("add")
sub = _op("sub")
mul = _op("mul")
div = _op("div")
pow = _op("pow")


def zeros(shape: Sequence[int], dtype: Any = 0, name: Optional[str] = None) -> Symbol:
    return create("zeros", name=name, shape=list(shape), dtype=str(dtype))


def ones(shape: Sequence[int], dtype: Any = 0, name: Optional[str] = None) -> Symbol:
    return create("ones", name=name, shape=list(shape), dtype=str(dtype))


def normal(shape: Sequence[int], stdev: float = 1.0, mean: float = 0.0, name: Optional[str] = None) -> Symbol:
    """Samples of N(mean, stdev^2) from torch's generator, drawn on each run."""
    return create("normal", name=name, shape=list(shape), stdev=float(stdev), mean=float(mean))


def argmax(x: Symbol, axis: int = 0, name: Optional[str] = None) -> Symbol:
    """0-based indices of the largest entries along axis, as float32."""
    return create("argmax", x, name=name, axis=int(axis))


def _reduction(op_name: str):
    def reduce(x: Symbol, reduction_indices: Optional[Sequence[int]] = None, name: Optional[str] = None,
               axis: Optional[Sequence[int]] = None) -> Symbol:
        axes = axis if reduction_indices is None else reduction_indices
        if isinstance(axes, int):
            axes = [axes]
        return create(op_name, x, name=name, **({} if axes is None else {"reduction_indices": list(axes)}))
    reduce.__name__ = reduce.__qualname__ = op_name
    reduce.__doc__ = (f"{op_name} over reduction_indices (every axis when None); the reduced axes "
                      "are dropped.")
    return reduce


reduce_sum = _reduction("reduce_sum")
reduce_mean = _reduction("reduce_mean")
