"""One graph mixing three kinds of ops, trained on scikit-learn's digits: a legacy Lua module
(nn.Linear then nn.MyLayer, the torch.class layer of examples/custom_layer.lua, built by a Lua
constructor string), a numpy function (row standardisation, with its gradient written in numpy)
and tinyflow ops (matmul, the softmax cross-entropy criterion, gradient descent).

    python examples/mixed_graph.py [--steps 300] [--batch 100] [--lr 0.2] [--hidden 32]

    x (n x 64) -> Lua: nn.Sequential(nn.Linear(64, hidden), nn.MyLayer) -> numpy: standardise
      -> tinyflow: matmul W -> softmax cross-entropy with the labels

The Lua module's parameters become graph variables initialised by its own reset; W starts at
zero. Prints the loss as it trains and the test accuracy.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

import luabridge
import luabridge.tinyflow as tf
from luabridge.graph import lua_module, python_op

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from tinyflow_softmax import load  # noqa: E402  (the digits as tinyflow's datasets give MNIST)

EPS = 1e-5


def standardise(h: np.ndarray) -> np.ndarray:
    """Each row to mean 0, variance 1 (a layer normalisation without parameters)."""
    centred = h - h.mean(axis=1, keepdims=True)
    return centred / np.sqrt((centred ** 2).mean(axis=1, keepdims=True) + EPS)


def standardise_grad(ins: list, outs: list, grads: list) -> list:
    """d loss / d h from y = standardise(h) and g = d loss / d y, row by row:
    (g - mean(g) - y * mean(g * y)) / std."""
    (h,), (y,), (g,) = ins, outs, grads
    std = np.sqrt(((h - h.mean(axis=1, keepdims=True)) ** 2).mean(axis=1, keepdims=True) + EPS)
    return [(g - g.mean(axis=1, keepdims=True) - y * (g * y).mean(axis=1, keepdims=True)) / std]


def build(hidden: int, lr: float) -> tuple:
    """(x, label, logits, loss, train_step) of the mixed graph."""
    luabridge.require("nn")
    if luabridge.eval("nn.MyLayer") is None:  # a torch.class is defined once per runtime
        luabridge.dofile(HERE / "custom_layer.lua")  # defines nn.MyLayer, a torch.class layer
    x = tf.placeholder(tf.float32)
    label = tf.placeholder(tf.float32)
    # a legacy Lua module as one node: its weight, bias and slope become graph variables
    features = lua_module(x, f"nn.Sequential():add(nn.Linear(64, {hidden})):add(nn.MyLayer(1))", name="lua")
    # a numpy function as an op, with its gradient
    normed = python_op(standardise, grad=standardise_grad, name="standardise")(features)
    # tinyflow ops
    W = tf.Variable(tf.zeros([hidden, 10]), name="W")
    logits = tf.matmul(normed, W)
    loss = tf.nn.mean_sparse_softmax_cross_entropy_with_logits(logits, label)
    train_step = tf.train.GradientDescentOptimizer(lr).minimize(loss)
    return x, label, logits, loss, train_step


def main(argv: list[str] | None = None) -> float:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--lr", type=float, default=0.2)
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--log", type=int, default=50, help="print the mean loss every LOG steps")
    args = parser.parse_args(argv)
    luabridge.require("torch").manualSeed(args.seed)  # the Lua module's reset draws from torch's generator
    train, test_x, test_y = load(args.seed, flatten=True, onehot=False)

    x, label, logits, loss, train_step = build(args.hidden, args.lr)
    print("graph inputs:", ", ".join(loss.list_input_names()))
    sess = tf.Session()
    sess.run(tf.initialize_all_variables())

    start, losses = time.perf_counter(), []
    for step in range(1, args.steps + 1):
        batch_xs, batch_ys = train.next_batch(args.batch)
        value, _ = sess.run([loss, train_step], feed_dict={x: batch_xs, label: batch_ys})
        losses.append(float(value[0]))
        if step % args.log == 0 or step == args.steps:
            print(f"step {step}: loss {np.mean(losses[-args.log:]):.4f}")
    elapsed = time.perf_counter() - start

    accuracy = tf.reduce_mean(tf.equal(tf.argmax(logits, 1), label))
    acc = float(sess.run(accuracy, feed_dict={x: test_x, label: test_y})[0])
    print(f"{args.steps} steps in {elapsed:.2f} s ({1e3 * elapsed / max(args.steps, 1):.2f} ms per step); "
          f"learned MyLayer slope {float(sess.variable('lua_param3')[0]):.3f}")
    print(f"test accuracy {100 * acc:.2f}% ({len(test_y)} images)")
    return acc


if __name__ == "__main__":
    main()
