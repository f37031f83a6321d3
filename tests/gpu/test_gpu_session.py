"""The tinyflow LeNet (examples/tinyflow_lenet.py) under Session("gpu") and Session("gpu fusion"):
the loss and every gradient against Session("cpu") and a numpy float64 forward pass, and three
Adam steps giving the CPU's losses."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import luabridge.tinyflow as tf

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tinyflow_lenet.py"
CONFIGS = ("cpu", "gpu", "gpu fusion")


def _lenet():
    spec = importlib.util.spec_from_file_location("tinyflow_lenet_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.lenet


@pytest.fixture(scope="module")
def lenet_graph():
    x, label = tf.placeholder(tf.float32), tf.placeholder(tf.float32)
    loss = tf.nn.mean_sparse_softmax_cross_entropy_with_logits(_lenet()(x), label)
    shapes = list(tf.infer_variable_shapes(loss, feed_dict={x: [6, 1, 16, 16], label: [6]}))
    return x, label, loss, shapes


def _numpy_loss(images, labels, p):
    """LeNet's forward pass in float64: valid convolutions, tanh, 2x2 max pooling, two bias-free
    linear layers, the mean softmax cross-entropy."""
    def conv(x, w, b):
        O, _, k, _ = w.shape
        n = x.shape[2] - k + 1
        y = np.zeros((x.shape[0], O, n, n))
        for i in range(k):
            for j in range(k):
                y += np.einsum("oc,bchw->bohw", w[:, :, i, j], x[:, :, i:i + n, j:j + n])
        return y + b[None, :, None, None]

    def pool(x):
        B, C, H, W = x.shape
        return x.reshape(B, C, H // 2, 2, W // 2, 2).max((3, 5))

    h = pool(np.tanh(conv(images, p["conv1_weight"], p["conv1_bias"])))
    h = pool(np.tanh(conv(h, p["conv2_weight"], p["conv2_bias"])))
    logits = np.tanh(h.reshape(len(h), -1) @ p["fc1_weight"].T) @ p["fc2_weight"].T
    z = logits - logits.max(1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(1, keepdims=True))
    return -logp[np.arange(len(labels)), labels.astype(int)].mean()


def _session(config, shapes, init, others=None):
    """A session with LeNet's variables set to init, then the op `others` run (initializers)."""
    sess = tf.Session(config)
    holders = {n: tf.placeholder(tf.float32) for n in init}
    sess.run([tf.assign(v, holders[n]) for v, n, _ in shapes], feed_dict={holders[n]: init[n] for n in init})
    if others is not None:
        sess.run(others)
    return sess


def test_lenet_loss_and_gradients_on_the_gpu_sessions(lenet_graph, rng):
    x, label, loss, shapes = lenet_graph
    images = rng.standard_normal((6, 1, 16, 16)).astype(np.float32)
    labels = rng.integers(0, 10, 6).astype(np.float32)
    init = {n: (0.2 * rng.standard_normal(s)).astype(np.float32) for _, n, s in shapes}
    fetch = [loss] + tf.gradients(loss, [v for v, _, _ in shapes])
    results = {}
    for config in CONFIGS:
        sess = _session(config, shapes, init)
        results[config] = sess.run(fetch, feed_dict={x: images, label: labels})
        assert sess.device.name == ("cpu" if config == "cpu" else "cuda")
    want = _numpy_loss(images.astype(np.float64), labels, {n: v.astype(np.float64) for n, v in init.items()})
    for config in CONFIGS:
        assert float(np.ravel(results[config][0])[0]) == pytest.approx(want, rel=1e-5)
        for g, c in zip(results[config][1:], results["cpu"][1:]):
            np.testing.assert_allclose(g, c, rtol=1e-4, atol=1e-6)


def test_lenet_adam_steps_on_the_gpu_sessions(lenet_graph, rng):
    x, label, loss, shapes = lenet_graph
    images = rng.standard_normal((6, 1, 16, 16)).astype(np.float32)
    labels = rng.integers(0, 10, 6).astype(np.float32)
    init = {n: (0.2 * rng.standard_normal(s)).astype(np.float32) for _, n, s in shapes}
    step = tf.train.AdamOptimizer(learning_rate=0.01).minimize(loss)
    moments = tf.initialize_all_variables()   # Adam's state (the variables made since the last call)
    losses = {}
    for config in CONFIGS:
        sess = _session(config, shapes, init, moments)
        losses[config] = []
        for _ in range(3):
            value, _ = sess.run([loss, step], feed_dict={x: images, label: labels})
            losses[config].append(float(np.ravel(value)[0]))
        if config == "gpu fusion":   # the optimizer's elementwise updates ran as fused groups
            fused = [ex.plan.graph.attrs.get("fusion") for _, ex in sess._cache.values() if ex.plan]
            assert any(fused)
    assert losses["cpu"][2] < losses["cpu"][0]
    for config in CONFIGS[1:]:
        np.testing.assert_allclose(losses[config], losses["cpu"], rtol=1e-4)
