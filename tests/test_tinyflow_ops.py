"""Every op of the tinyflow front end: values against numpy float64 references and gradients
(through tf.gradients) against central differences of those references; shape inference; the
kernel paths (straight-line, loop, numpy's loops, broadcast, strided fallbacks); error cases."""
from __future__ import annotations

from typing import Callable

import numpy as np
import pytest

import luabridge
import luabridge.tinyflow as tf
from luabridge.graph.passes.infer import InferenceError

SIZES = [(2, 3), (5, 7), (20, 30)]  # kernel paths: straight-line (<= 8 elements), numpy loops


def numeric_grad(f: Callable[[np.ndarray], float], a: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    a = a.astype(np.float64)
    g = np.zeros_like(a)
    for i in np.ndindex(a.shape):
        old = a[i]
        a[i] = old + eps
        hi = f(a)
        a[i] = old - eps
        lo = f(a)
        a[i] = old
        g[i] = (hi - lo) / (2 * eps)
    return g


def check(build: Callable, ref: Callable, inputs: list, rng, grad: bool = True, rtol: float = 1e-5,
          atol: float = 1e-5, grad_tol: float = 2e-3, wrt: tuple = None) -> None:
    """build(*placeholders) against ref(*float64 arrays); then d sum(out * R) / d input."""
    inputs = [np.asarray(a, dtype=np.float32) for a in inputs]
    phs = [tf.placeholder(tf.float32) for _ in inputs]
    out = build(*phs)
    sess = tf.Session()
    feed = dict(zip(phs, inputs))
    want = np.asarray(ref(*[a.astype(np.float64) for a in inputs]))
    got = sess.run(out, feed_dict=feed)
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
    if not grad:
        return
    weights = rng.standard_normal(want.shape)
    r = tf.placeholder(tf.float32)
    wrt = range(len(inputs)) if wrt is None else wrt
    grads = tf.gradients(tf.reduce_sum(out * r), [phs[i] for i in wrt])
    got_g = sess.run(grads, feed_dict={**feed, r: weights})
    for i, g in zip(wrt, got_g):
        def f(v, i=i):
            args = [a.astype(np.float64) for a in inputs]
            args[i] = v
            return float((ref(*args) * weights).sum())
        want_g = numeric_grad(f, inputs[i])
        assert g.shape == inputs[i].shape
        scale = max(1.0, np.abs(want_g).max())
        np.testing.assert_allclose(g, want_g, rtol=grad_tol, atol=grad_tol * scale, err_msg=f"input {i}")


# ---- elementwise ----

BINARY = {
    "add": (lambda a, b: a + b, lambda a, b: a + b),
    "sub": (lambda a, b: a - b, lambda a, b: a - b),
    "mul": (lambda a, b: a * b, lambda a, b: a * b),
    "div": (lambda a, b: a / b, lambda a, b: a / b),
    "pow": (lambda a, b: a ** b, lambda a, b: a ** b),
}


@pytest.mark.parametrize("shape", SIZES)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary(name, shape, rng):
    op, ref = BINARY[name]
    a, b = rng.uniform(0.5, 2, shape), rng.uniform(0.5, 2, shape)
    check(op, ref, [a, b], rng, grad=shape != (20, 30))


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("side", [0, 1])
def test_binary_broadcasts_a_one_element_operand(name, side, rng):
    """A (1,)-shaped operand (tinyflow's scalars) broadcasts; its gradient is summed back."""
    op, ref = BINARY[name]
    full, one = rng.uniform(0.5, 2, (3, 4)), rng.uniform(0.5, 2, (1,))
    args = [full, one] if side else [one, full]
    check(op, ref, args, rng)


def test_equal(rng):
    a = rng.integers(0, 3, (5, 7)).astype(np.float32)
    b = rng.integers(0, 3, (5, 7)).astype(np.float32)
    check(tf.equal, lambda a, b: (a == b).astype(np.float64), [a, b], rng, grad=False)
    sess, x, y = tf.Session(), tf.placeholder(tf.float32), tf.placeholder(tf.float32)
    gx, = tf.gradients(tf.reduce_sum(tf.equal(x, y) * x), [y])  # no gradient through equal
    np.testing.assert_array_equal(sess.run(gx, feed_dict={x: a, y: b}), np.zeros_like(b))


SCALAR = {
    "x+s": (lambda x: x + 2.5, lambda x: x + 2.5),
    "s+x": (lambda x: 2.5 + x, lambda x: 2.5 + x),
    "x-s": (lambda x: x - 2.5, lambda x: x - 2.5),
    "s-x": (lambda x: 2.5 - x, lambda x: 2.5 - x),
    "x*s": (lambda x: x * -3, lambda x: x * -3),
    "s*x": (lambda x: -3 * x, lambda x: -3 * x),
    "x/s": (lambda x: x / 4, lambda x: x / 4),
    "s/x": (lambda x: 2 / x, lambda x: 2 / x),
    "x**2": (lambda x: x ** 2, lambda x: x ** 2),
    "x**3": (lambda x: x ** 3, lambda x: x ** 3),
    "x**0.5": (lambda x: x ** 0.5, lambda x: x ** 0.5),
    "x**1": (lambda x: x ** 1, lambda x: x ** 1),
    "x**0": (lambda x: x ** 0, lambda x: x ** 0),
    "s**x": (lambda x: 1.5 ** x, lambda x: 1.5 ** x),
    "-x": (lambda x: -x, lambda x: -x),
    "exp": (tf.exp, np.exp),
    "log": (tf.log, np.log),
    "sqrt": (tf.sqrt, np.sqrt),
}


@pytest.mark.parametrize("shape", SIZES)
@pytest.mark.parametrize("name", sorted(SCALAR))
def test_with_scalar_and_unary(name, shape, rng):
    op, ref = SCALAR[name]
    check(op, ref, [rng.uniform(0.5, 2, shape)], rng, grad=shape != (20, 30))


def test_numpy_scalar_operands(rng):
    a = rng.uniform(0.5, 2, (3, 3))
    check(lambda x: np.float32(2) * x + np.float64(1), lambda x: 2 * x + 1, [a], rng)


def test_chained_expression(rng):
    """An expression reusing entries (gradients summed from several consumers)."""
    a, b = rng.uniform(0.5, 2, (4, 5)), rng.uniform(0.5, 2, (4, 5))
    check(lambda x, y: (x * y + tf.exp(-x)) / (y + 1) - x ** 2 * y,
          lambda x, y: (x * y + np.exp(-x)) / (y + 1) - x ** 2 * y, [a, b], rng)


# ---- reductions ----

@pytest.mark.parametrize("axes", [None, [1], [0], [-1], [1, 3], [0, 2, 3], [0, 1, 2, 3], [2, 0]])
@pytest.mark.parametrize("kind", ["sum", "mean"])
def test_reductions(kind, axes, rng):
    x = rng.standard_normal((2, 4, 3, 5))
    op = tf.reduce_sum if kind == "sum" else tf.reduce_mean
    npf = np.sum if kind == "sum" else np.mean

    def ref(a):
        r = npf(a, axis=None if axes is None else tuple(axes))
        return np.atleast_1d(r)
    check(lambda v: op(v, reduction_indices=axes), ref, [x], rng)


@pytest.mark.parametrize("n", [5, 300, 5000])
def test_full_reduction_sizes(n, rng):
    x = rng.standard_normal(n)
    check(tf.reduce_sum, lambda a: np.atleast_1d(a.sum()), [x], rng, grad=n < 1000, rtol=1e-5, atol=1e-4)


def test_multi_axis_reduction_recomputes_on_every_run(rng):
    """tinyflow's fault: the closure replaced its input by the partial sum, so a second run
    reduced stale data."""
    x = tf.placeholder(tf.float32)
    y = tf.reduce_sum(x, reduction_indices=[1, 3])
    sess = tf.Session()
    for _ in range(3):
        a = rng.standard_normal((2, 4, 8, 7)).astype(np.float32)
        np.testing.assert_allclose(sess.run(y, feed_dict={x: a}), a.astype(np.float64).sum(axis=(1, 3)),
                                   rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_argmax(axis, rng):
    x = rng.standard_normal((30, 10, 3))
    check(lambda v: tf.argmax(v, axis), lambda a: np.argmax(a, axis).astype(np.float64), [x], rng, grad=False)


def test_argmax_takes_the_first_of_ties_and_nan():
    x = tf.placeholder(tf.float32)
    a = np.array([[1, 3, 3], [np.nan, 2, 1], [0, np.nan, 5]], dtype=np.float32)
    np.testing.assert_array_equal(tf.Session().run(tf.argmax(x, 1), feed_dict={x: a}), np.argmax(a, 1))


# ---- matrix product ----

@pytest.mark.parametrize("mnk", [(2, 3, 2), (5, 7, 4), (30, 40, 20), (1, 1, 1)])
@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
def test_matmul(mnk, ta, tb, rng):
    m, n, k = mnk
    a = rng.standard_normal((k, m) if ta else (m, k))
    b = rng.standard_normal((n, k) if tb else (k, n))
    check(lambda x, y: tf.matmul(x, y, transpose_a=ta, transpose_b=tb),
          lambda x, y: (x.T if ta else x) @ (y.T if tb else y), [a, b], rng, rtol=1e-4, atol=1e-4,
          grad=m * n * k < 5000)


@pytest.mark.parametrize("spelling", ["true", "1", " TRUE "])
def test_matmul_transpose_attributes_in_any_spelling(spelling, rng):
    # shape inference and the Lua kernel read the attribute by one rule
    a, b = rng.standard_normal((3, 2)), rng.standard_normal((4, 3))
    check(lambda x, y: tf.matmul(x, y, transpose_a=spelling, transpose_b=spelling),
          lambda x, y: x.T @ y.T, [a, b], rng, rtol=1e-4, atol=1e-4)


# ---- nn ops ----

def test_softmax_relu_tanh(rng):
    x = rng.standard_normal((4, 6))
    check(tf.nn.softmax, lambda a: np.exp(a) / np.exp(a).sum(1, keepdims=True), [x], rng)
    check(tf.nn.relu, lambda a: np.maximum(a, 0), [x + np.sign(x) * 0.01], rng)
    check(tf.tanh, np.tanh, [x], rng)


@pytest.mark.parametrize("bias", [False, True])
def test_linear(bias, rng):
    x, w, b = rng.standard_normal((4, 6)), rng.standard_normal((3, 6)), rng.standard_normal(3)
    if bias:
        check(lambda x, w, b: tf.nn.linear(x, weight=w, bias=b, num_hidden=3, no_bias=False),
              lambda x, w, b: x @ w.T + b, [x, w, b], rng)
    else:
        check(lambda x, w: tf.nn.linear(x, weight=w), lambda x, w: x @ w.T, [x, w], rng)


def conv_ref(x, w, b=None, stride=(1, 1), pad=(0, 0)):
    x = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    oh, ow = (h - kh) // stride[0] + 1, (wd - kw) // stride[1] + 1
    out = np.zeros((n, o, oh, ow))
    for i in range(oh):
        for j in range(ow):
            patch = x[:, :, i * stride[0]:i * stride[0] + kh, j * stride[1]:j * stride[1] + kw]
            out[:, :, i, j] = np.einsum("nchw,ochw->no", patch, w)
    return out + (0 if b is None else b[None, :, None, None])


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
@pytest.mark.parametrize("stride", [1, 2])
def test_conv2d(padding, stride, rng):
    x, w, b = rng.standard_normal((2, 3, 7, 6)), rng.standard_normal((4, 3, 3, 2)), rng.standard_normal(4)
    pad = (1, 0) if padding == "SAME" else (0, 0)
    check(lambda x, w, b: tf.nn.conv2d(x, weight=w, bias=b, no_bias=False, strides=[1, stride, stride, 1],
                                       padding=padding),
          lambda x, w, b: conv_ref(x, w, b, (stride, stride), pad), [x, w, b], rng, rtol=1e-4, atol=1e-4)


def pool_ref(x, k, s, pad, kind):
    fill = -np.inf if kind == "max" else 0
    x = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])), constant_values=fill)
    n, c, h, w = x.shape
    oh, ow = (h - k[0]) // s[0] + 1, (w - k[1]) // s[1] + 1
    out = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            win = x[:, :, i * s[0]:i * s[0] + k[0], j * s[1]:j * s[1] + k[1]]
            out[:, :, i, j] = win.max((2, 3)) if kind == "max" else win.sum((2, 3)) / (k[0] * k[1])
    return out


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("padding", ["SAME", "VALID"])
def test_pooling(kind, padding, rng):
    x = rng.standard_normal((2, 3, 7, 6))
    op = tf.nn.max_pool if kind == "max" else tf.nn.avg_pool
    pad = (1, 1) if padding == "SAME" else (0, 0)
    check(lambda v: op(v, ksize=[1, 3, 3, 1], strides=[1, 2, 2, 1], padding=padding),
          lambda a: pool_ref(a, (3, 3), (2, 2), pad, kind), [x], rng)


@pytest.mark.parametrize("pad", [-2, 3])
def test_pad(pad, rng):
    x = rng.standard_normal((2, 3, 4))
    widths = [(0, 0), (abs(pad), 0) if pad < 0 else (0, pad), (0, 0)]
    check(lambda v: tf.pad(v, dim=1, pad=pad), lambda a: np.pad(a, widths), [x], rng)


@pytest.mark.parametrize("shape", [(4, 3, 2, 5), (6, 3)])
def test_batch_normalization(shape, rng):
    """Batch statistics (training mode), biased variance, eps 1e-5, as torch7's."""
    x, gamma, beta = rng.standard_normal(shape) * 2 + 1, rng.standard_normal(3), rng.standard_normal(3)

    def ref(x, g, b):
        axes = (0, 2, 3) if x.ndim == 4 else (0,)
        view = (1, -1, 1, 1) if x.ndim == 4 else (1, -1)
        mean, var = x.mean(axes, keepdims=True), x.var(axes, keepdims=True)
        return (x - mean) / np.sqrt(var + 1e-5) * g.reshape(view) + b.reshape(view)
    check(lambda x, g, b: tf.nn.batch_normalization(x, gamma=g, beta=b), ref, [x, gamma, beta], rng,
          rtol=1e-4, atol=1e-4)


def test_cross_entropy_with_zero_based_labels(rng):
    logits, labels = rng.standard_normal((5, 4)), np.array([0, 3, 1, 1, 2])

    def ref(z, y):
        lsm = z - np.log(np.exp(z).sum(1, keepdims=True))
        return np.atleast_1d(-lsm[np.arange(len(y)), y.astype(int)].mean())
    check(tf.nn.mean_sparse_softmax_cross_entropy_with_logits, ref, [logits, labels], rng, wrt=(0,))


def test_flatten(rng):
    x = rng.standard_normal((3, 2, 2, 5))
    check(tf.nn.flatten_layer, lambda a: a.reshape(3, -1), [x], rng)


# ---- constants, state ----

def test_constants():
    sess = tf.Session()
    np.testing.assert_array_equal(sess.run(tf.zeros([10, 20])), np.zeros((10, 20)))
    np.testing.assert_array_equal(sess.run(tf.ones(shape=[3, 17])), np.ones((3, 17)))
    x = tf.placeholder(tf.float32)
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    z, o = sess.run([tf.zeros_like(x), tf.ones_like(x)], feed_dict={x: a})
    np.testing.assert_array_equal(z, np.zeros((2, 3)))
    np.testing.assert_array_equal(o, np.ones((2, 3)))


def test_normal_draws_from_torch_generator():
    luabridge.require("torch").manualSeed(7)
    sess = tf.Session()
    s = sess.run(tf.normal([200, 100], 0.5))
    assert s.shape == (200, 100) and s.dtype == np.float32
    assert abs(s.mean()) < 0.01 and abs(s.std() - 0.5) < 0.01
    luabridge.require("torch").manualSeed(7)
    np.testing.assert_array_equal(sess.run(tf.normal([200, 100], 0.5)), s)


# ---- shape inference ----

def test_infer_variable_shapes_of_an_mlp_and_lenet():
    x, label = tf.placeholder(tf.float32), tf.placeholder(tf.float32)
    fc1 = tf.nn.linear(x, num_hidden=100, name="fc1", no_bias=False)
    fc2 = tf.nn.linear(tf.nn.relu(fc1), num_hidden=10, name="fc2")
    loss = tf.nn.mean_sparse_softmax_cross_entropy_with_logits(fc2, label)
    shapes = {n: s for _, n, s in tf.infer_variable_shapes(loss, feed_dict={x: [100, 784], label: [100]})}
    assert shapes == {"fc1_weight": [100, 784], "fc1_bias": [100], "fc2_weight": [10, 100]}

    img = tf.placeholder(tf.float32)
    conv = tf.nn.conv2d(img, num_filter=20, ksize=[1, 11, 11, 1], name="wide", no_bias=False)
    pool = tf.nn.max_pool(conv, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1])
    out = tf.nn.linear(tf.nn.flatten_layer(pool), num_hidden=12, name="head")
    shapes = {n: s for _, n, s in tf.infer_variable_shapes(out, feed_dict={img: [8, 3, 32, 32]})}
    # multi-digit tuple attributes parse whole (tinyflow read "[1,11,11,1]" digit by digit)
    assert shapes == {"wide_weight": [20, 3, 11, 11], "wide_bias": [20], "head_weight": [12, 20 * 11 * 11]}


def test_infer_variable_shapes_needs_enough_feeds():
    x = tf.placeholder(tf.float32)
    y = tf.matmul(x, tf.Variable(name="w_unknown"))
    with pytest.raises(ValueError, match="w_unknown"):
        list(tf.infer_variable_shapes(y, feed_dict={x: [2, 3]}))


# ---- errors ----

def _run(sym, **feeds):
    return tf.Session().run(sym, feed_dict=feeds.get("feed"))


def test_error_inconsistent_elementwise_shapes():
    x, y = tf.placeholder(tf.float32), tf.placeholder(tf.float32)
    with pytest.raises(InferenceError, match=r"only shape \(1,\) broadcasts"):
        _run(x + y, feed={x: np.ones((2, 3)), y: np.ones((3, 2))})


def test_error_matmul_inner_sizes():
    x, y = tf.placeholder(tf.float32), tf.placeholder(tf.float32)
    with pytest.raises(InferenceError, match=r"matmul.*inner sizes differ: \(2, 3\) x \(4, 2\)"):
        _run(tf.matmul(x, y), feed={x: np.ones((2, 3)), y: np.ones((4, 2))})
    with pytest.raises(InferenceError, match="2-D operands"):
        _run(tf.matmul(x, y), feed={x: np.ones((2, 3, 1)), y: np.ones((3, 2))})


def test_error_bad_windows_and_layouts():
    x, w = tf.placeholder(tf.float32), tf.placeholder(tf.float32)
    feed = {x: np.ones((1, 1, 4, 4)), w: np.ones((2, 1, 5, 5))}
    with pytest.raises(InferenceError, match=r"ksize must be \[1, h, w, 1\]"):
        _run(tf.nn.max_pool(x, ksize=[2, 2, 2, 2]), feed=feed)
    with pytest.raises(InferenceError, match="only data_format 'NCHW'"):
        _run(tf.nn.conv2d(x, w, num_filter=2, ksize=[1, 5, 5, 1], data_format="NHWC"), feed=feed)
    with pytest.raises(InferenceError, match="window 5x5 larger than the input"):
        _run(tf.nn.conv2d(x, w, num_filter=2, ksize=[1, 5, 5, 1]), feed=feed)
    with pytest.raises(InferenceError, match="padding must be 'SAME' or 'VALID'"):
        _run(tf.nn.avg_pool(x, ksize=[1, 2, 2, 1], padding="FULL"), feed=feed)


def test_error_reduction_axes():
    x = tf.placeholder(tf.float32)
    with pytest.raises(InferenceError, match="axis 2 is out of range for 2 dims"):
        _run(tf.reduce_sum(x, reduction_indices=[2]), feed={x: np.ones((2, 3))})
    with pytest.raises(InferenceError, match="axis repeated"):
        _run(tf.reduce_mean(x, reduction_indices=[1, -1]), feed={x: np.ones((2, 3))})


def test_error_labels():
    z, y = tf.placeholder(tf.float32), tf.placeholder(tf.float32)
    loss = tf.nn.mean_sparse_softmax_cross_entropy_with_logits(z, y)
    with pytest.raises(InferenceError, match="one 0-based class per row"):
        _run(loss, feed={z: np.ones((3, 4)), y: np.ones(2)})
    sess = tf.Session()
    with pytest.raises(luabridge.LuaError, match="mean_sparse_softmax_cross_entropy_with_logits"):
        sess.run(loss, feed_dict={z: np.ones((2, 4)), y: np.array([0, 4])})  # class 4 of 0..3
    # the session stays usable
    np.testing.assert_allclose(sess.run(loss, feed_dict={z: np.zeros((2, 4)), y: np.array([0, 3])}), [np.log(4)],
                               rtol=1e-6)


# ---- the Lua kernels directly: strided operands take torch methods ----

def test_kernels_on_strided_operands(lua, rng):
    a = rng.standard_normal((6, 4)).astype(np.float32)
    b = rng.standard_normal((4, 6)).astype(np.float32)
    run = lua.eval("""function(a, b)
      local K = require 'luabridge.graph.ops'
      local at, bt = a:t(), b:t()            -- 4x6 and 6x4 transposed views
      local r = {}
      r.add = torch.FloatTensor(4, 6); K.ewise('add', r.add, {at, b})()
      r.sq = torch.FloatTensor(6, 4); K.ewise('pow_scalar', r.sq:t(), {at}, 3)()
      r.sum = torch.FloatTensor(4); K.reduce('sum', r.sum, at, {1})()
      r.mean = torch.FloatTensor(6, 4); K.reduceBackward('mean', r.mean:t(), r.sum, {1})()
      r.arg = torch.FloatTensor(4); K.argmax(r.arg, at, 1)()
      r.mm = torch.FloatTensor(6, 6); K.matmul(r.mm, at, bt, true, true)()
      return r
    end""")
    r = run(lua.from_numpy(a), lua.from_numpy(b))
    got = {k: lua.to_numpy(r[k]) for k in ("add", "sq", "sum", "mean", "arg", "mm")}
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    np.testing.assert_allclose(got["add"], a64.T + b64, rtol=1e-6)
    np.testing.assert_allclose(got["sq"], (a64 ** 3), rtol=1e-5)
    np.testing.assert_allclose(got["sum"], a64.sum(0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got["mean"], np.broadcast_to(a64.sum(0) / 6, (6, 4)), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(got["arg"], a.argmax(0))
    np.testing.assert_allclose(got["mm"], a64 @ b64, rtol=1e-5, atol=1e-5)


DEVICE_SCRIPT = r"""
import numpy as np
import luabridge.tinyflow as tf
x, y = tf.placeholder(tf.float32), tf.placeholder(tf.float32)
sess = tf.Session(config="gpu")
rng = np.random.default_rng(0)
a, b = rng.uniform(0.5, 2, (3, 4)), rng.uniform(0.5, 2, (3, 4))
one = np.array([1.5])
cases = [
    (x + y, a + b, b), (2 / x - y ** 2, 2 / a - b ** 2, b), (x * y, a * one, one),
    (tf.reduce_sum(tf.exp(x) * y, reduction_indices=[1]), (np.exp(a) * b).sum(1), b),
    (tf.reduce_mean(x, reduction_indices=[0]), a.mean(0), b),
    (tf.argmax(x, 1), a.argmax(1), b), (tf.equal(x, x), np.ones((3, 4)), b),
    (tf.matmul(x, y, transpose_b=True), a @ b.T, b),
    (tf.gradients(tf.reduce_mean(x * y), [x])[0], b / 12, b),
    (tf.gradients(tf.reduce_sum(x * y), [y])[0], np.atleast_1d(a.sum()), one),
    (tf.nn.softmax(x), np.exp(a) / np.exp(a).sum(1, keepdims=True), b),
]
for sym, want, feed_y in cases:
    got = sess.run(sym, feed_dict={x: a, y: feed_y})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
print("device ok", len(cases))
"""


def test_device_path_on_the_numpy_cuda_backend():
    """Session('gpu') with the CUDA backend running on numpy: the kernels take torch methods on
    device tensors."""
    import os
    import subprocess
    import sys
    env = dict(os.environ, LUABRIDGE_CUDA_ARRAY_MODULE="numpy")
    run = subprocess.run([sys.executable, "-c", DEVICE_SCRIPT], env=env, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "device ok 11" in run.stdout


def test_zero_size_operands():
    x, y = tf.placeholder(tf.float32), tf.placeholder(tf.float32)
    sess, e = tf.Session(), np.zeros((0, 3), np.float32)
    assert sess.run(x * y + 1, feed_dict={x: e, y: e}).shape == (0, 3)
    np.testing.assert_array_equal(sess.run(tf.reduce_sum(x, reduction_indices=[0]), feed_dict={x: e}), np.zeros(3))
    assert sess.run(tf.reduce_mean(x, reduction_indices=[1]), feed_dict={x: e}).shape == (0,)
    np.testing.assert_array_equal(sess.run(tf.matmul(y, x, transpose_a=True), feed_dict={x: e, y: np.ones((0, 2))}),
                                  np.zeros((2, 3)))
    assert sess.run(tf.gradients(tf.reduce_sum(x * y), [x])[0], feed_dict={x: e, y: e}).shape == (0, 3)
