"""LeNet on scikit-learn's digits, written as tinyflow's example/mnist_lenet.py (automatic
variable shape inference, Adam) with only the import changed, run by luabridge's graph
executor: convolutions, pooling, tanh, linear layers and the criterion are Lua nn modules.

    python examples/tinyflow_lenet.py [--epochs 10] [--batch 50] [--scale 2]

The 8x8 images are upsampled by --scale (16x16 by default). Prints the loss per epoch and
the test accuracy.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

import luabridge
import luabridge.tinyflow as tf

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tinyflow_softmax import load  # noqa: E402  (the digits, as tinyflow's datasets give MNIST)


def lenet(x: tf.Symbol) -> tf.Symbol:
    conv1 = tf.nn.conv2d(x, num_filter=20, ksize=[1, 5, 5, 1], name="conv1", no_bias=False)
    tanh1 = tf.tanh(conv1)
    pool1 = tf.nn.max_pool(tanh1, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1])
    conv2 = tf.nn.conv2d(pool1, num_filter=50, ksize=[1, 3, 3, 1], name="conv2", no_bias=False)
    tanh2 = tf.tanh(conv2)
    pool2 = tf.nn.max_pool(tanh2, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1])
    flatten = tf.nn.flatten_layer(pool2)
    fc1 = tf.nn.linear(flatten, num_hidden=100, name="fc1")
    tanh3 = tf.tanh(fc1)
    return tf.nn.linear(tanh3, num_hidden=10, name="fc2")


def main(argv: list[str] | None = None) -> float:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--scale", type=int, default=2, help="upsampling of the 8x8 images")
    parser.add_argument("--lr", type=float, default=0.005)
    parser.add_argument("--steps", type=int, default=0, help="stop after this many steps (0: all)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    luabridge.require("torch").manualSeed(args.seed)  # tf.normal draws from torch's generator
    train, test_x, test_y = load(args.seed, flatten=False, onehot=False)
    up = np.ones((args.scale, args.scale), dtype=np.float32)
    train.images, test_x = np.kron(train.images, up), np.kron(test_x, up)
    side = 8 * args.scale

    # Create the model
    x = tf.placeholder(tf.float32)
    fc2 = lenet(x)

    # define loss
    label = tf.placeholder(tf.float32)
    cross_entropy = tf.nn.mean_sparse_softmax_cross_entropy_with_logits(fc2, label)
    train_step = tf.train.AdamOptimizer(args.lr).minimize(cross_entropy)

    sess = tf.Session()
    # Automatic variable shape inference API, infers the shape and initialize the weights.
    known_shape = {x: [args.batch, 1, side, side], label: [args.batch]}
    stdev = 0.01
    init_step = []
    for v, name, shape in tf.infer_variable_shapes(cross_entropy, feed_dict=known_shape):
        init_step.append(tf.assign(v, tf.normal(shape, stdev)))
        print("shape[%s]=%s" % (name, str(shape)))
    sess.run(init_step)
    sess.run(tf.initialize_all_variables())

    start, steps = time.perf_counter(), 0
    num_batch = len(train.images) // args.batch
    for epoch in range(args.epochs):
        sum_loss = 0.0
        for _ in range(num_batch):
            batch_xs, batch_ys = train.next_batch(args.batch)
            loss, _ = sess.run([cross_entropy, train_step], feed_dict={x: batch_xs, label: batch_ys})
            sum_loss += float(loss[0])
            steps += 1
            if steps == args.steps:
                break
        print("epoch[%d] cross_entropy=%g" % (epoch, sum_loss / num_batch))
        if steps == args.steps:
            break
    elapsed = time.perf_counter() - start

    correct_prediction = tf.equal(tf.argmax(fc2, 1), label)
    accuracy = tf.reduce_mean(correct_prediction)
    acc = float(sess.run(accuracy, feed_dict={x: test_x, label: test_y})[0])
    print(f"{steps} steps in {elapsed:.2f} s ({1e3 * elapsed / max(steps, 1):.1f} ms per step)")
    print(f"test accuracy {100 * acc:.2f}% ({len(test_y)} images)")
    return acc


if __name__ == "__main__":
    main()
