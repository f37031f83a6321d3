"""A tinyflow-compatible front end: a tinyflow program runs on luabridge's graph executor by
changing only its import to `import luabridge.tinyflow as tf`.

    x = tf.placeholder(tf.float32)
    W = tf.Variable(tf.zeros([784, 10]))
    y = tf.nn.softmax(tf.matmul(x, W))
    ...
    train_step = tf.train.GradientDescentOptimizer(0.5).minimize(loss)
    sess = tf.Session()
    sess.run(tf.initialize_all_variables())

Differences from tinyflow (its faults, fixed): tuple attributes with multi-digit entries
("[10,20]") parse whole; multi-axis reductions recompute from their input on every run; the
criterion's target is its second input (no Lua global); 2 / x and x ** 2 exist; the gradient of
an input that does not reach the output is zeros. argmax gives float32 0-based indices; the
criterion takes 0-based labels.
"""
from __future__ import annotations

import warnings
from typing import Any, Iterator, Optional, Sequence

from ..graph import Symbol, infer_shapes
from ..graph.session import Session as _GraphSession
from ..graph.symbol import Group, Node, create
from . import nn, train  # noqa: F401  (tf.nn, tf.train)
from ._ops import *  # noqa: F401,F403  (the op functions)
from ._ops import __all__ as _op_names
from .variables import Variable, gradients, group, initialize_all_variables

__all__ = ["float32", "float64", "placeholder", "Variable", "group", "gradients",
           "initialize_all_variables", "Session", "infer_variable_shapes", "Symbol", "Group",
           "nn", "train", *_op_names]

# data types as nnvm's codes
float32 = 0
float64 = 1


def placeholder(dtype: Any = float32, shape: Optional[Sequence] = None, name: Optional[str] = None) -> Symbol:
    """A value fed at run time (feed_dict). A shape with unknown (None) sizes is not recorded."""
    attrs = {"dtype": dtype if isinstance(dtype, str) else str(dtype)}
    if shape is not None and all(d is not None and d >= 0 for d in shape):
        attrs["shape"] = list(shape)
    return create("placeholder", name=name, **attrs)


class Session(_GraphSession):
    """tinyflow's Session: run(fetch, feed_dict) gives an array (fetch a symbol), a list of them
    (fetch a list), None for a group. config 'gpu' runs on the CPU, with a warning, where there
    is no CUDA device (tinyflow's examples ask for one)."""

    def __init__(self, config: str = "cpu", **kw: Any) -> None:
        try:
            super().__init__(config, **kw)
        except (NotImplementedError, RuntimeError) as e:
            if "gpu" not in config:
                raise
            warnings.warn(f"tinyflow Session({config!r}): {e}; running on the CPU", RuntimeWarning, stacklevel=2)
            super().__init__("cpu", **kw)


def infer_variable_shapes(net: Symbol, feed_dict: dict) -> Iterator[tuple[Symbol, str, list]]:
    """(variable, name, shape) of every variable of net, from the shapes of some placeholders
    ({placeholder: shape}); ValueError when the feed does not determine one."""
    known = {_node_of(k).name: tuple(v) for k, v in feed_dict.items()}
    shapes = infer_shapes(net, known)
    for v in net.list_input_variables():
        name = _node_of(v).name
        shape = shapes.get(name)
        if shape is None:
            raise ValueError(f"infer_variable_shapes: not sufficient information in feed_dict "
                             f"for variable {name!r}")
        yield v, name, list(shape)


def _node_of(s: Symbol) -> Node:
    if not isinstance(s, Symbol) or len(s.outputs) != 1:
        raise TypeError("expected a single-output symbol")
    return s.outputs[0].node
