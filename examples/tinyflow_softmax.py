"""Softmax regression on scikit-learn's digits, written as tinyflow's MNIST tutorial
(example/mnist_softmax.py) with only the import changed, run by luabridge's graph executor.

    python examples/tinyflow_softmax.py [--steps 500] [--batch 100] [--lr 0.5]

The 8x8 images are flattened to 64 features in [0, 1]; labels are one-hot. Prints the test
accuracy.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

import luabridge.tinyflow as tf


class Batches:
    """tinyflow's dataset interface: next_batch(n) walks a shuffled copy, reshuffling per epoch."""

    def __init__(self, images: np.ndarray, labels: np.ndarray, seed: int) -> None:
        self.images, self.labels = images, labels
        self.rng = np.random.default_rng(seed)
        self.order, self.at = self.rng.permutation(len(images)), 0

    def next_batch(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        if self.at + n > len(self.order):
            self.order, self.at = self.rng.permutation(len(self.images)), 0
        idx = self.order[self.at:self.at + n]
        self.at += n
        return self.images[idx], self.labels[idx]


def load(seed: int = 0, flatten: bool = True, onehot: bool = True) -> tuple:
    """(train batches, test images, test labels): images scaled to [0, 1] (n x 64, or
    n x 1 x 8 x 8 unflattened), labels one-hot (float32) or 0-based class numbers."""
    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)
    images = images.reshape(len(images), -1) if flatten else images[:, None]
    labels = np.eye(10, dtype=np.float32)[digits.target] if onehot else digits.target.astype(np.float32)
    x_tr, x_te, y_tr, y_te = train_test_split(images, labels, test_size=0.25, random_state=seed,
                                              stratify=digits.target)
    return Batches(x_tr, y_tr, seed), x_te, y_te


def main(argv: list[str] | None = None) -> float:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--lr", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    train, test_x, test_y = load(args.seed)

    # Create the model
    x = tf.placeholder(tf.float32, [None, 64])
    W = tf.Variable(tf.zeros([64, 10]))
    y = tf.nn.softmax(tf.matmul(x, W))

    # Define loss and optimizer
    y_ = tf.placeholder(tf.float32, [None, 10])
    cross_entropy = tf.reduce_mean(-tf.reduce_sum(y_ * tf.log(y), reduction_indices=[1]))
    train_step = tf.train.GradientDescentOptimizer(args.lr).minimize(cross_entropy)

    sess = tf.Session()
    sess.run(tf.initialize_all_variables())

    start = time.perf_counter()
    for _ in range(args.steps):
        batch_xs, batch_ys = train.next_batch(args.batch)
        sess.run(train_step, feed_dict={x: batch_xs, y_: batch_ys})
    elapsed = time.perf_counter() - start

    correct_prediction = tf.equal(tf.argmax(y, 1), tf.argmax(y_, 1))
    accuracy = tf.reduce_mean(correct_prediction)
    acc = float(sess.run(accuracy, feed_dict={x: test_x, y_: test_y})[0])
    print(f"{args.steps} steps in {elapsed:.2f} s ({1e3 * elapsed / args.steps:.2f} ms per step)")
    print(f"test accuracy {100 * acc:.2f}% ({len(test_y)} images)")
    return acc


if __name__ == "__main__":
    main()
