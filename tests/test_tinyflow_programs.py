"""tinyflow's own test programs (tests/python/test_ops.py, test_gradients.py, test_states.py)
with only the import changed, then the faults of tinyflow that the front end fixes, and the
optimizers' updates against numpy."""
from __future__ import annotations

import numpy as np
import pytest

import luabridge
import luabridge.tinyflow as tf

# ---- tinyflow's tests/python/test_ops.py ----


def check_ewise(ufunc):
    x = tf.placeholder(tf.float32)
    y = tf.placeholder(tf.float32)
    z = ufunc(x, y)
    ax = np.ones((2, 3))
    ay = np.ones((2, 3)) * 4
    sess = tf.Session()
    az = sess.run(z, feed_dict={x: ax, y: ay})
    np.testing.assert_almost_equal(az, ufunc(ax, ay))


def check_ewise_scalar(ufunc):
    x = tf.placeholder(tf.float32)
    y = 10
    z = ufunc(x, y)
    ax = np.ones((2, 3))
    sess = tf.Session()
    az = sess.run(z, feed_dict={x: ax})
    np.testing.assert_almost_equal(az, ufunc(ax, y))


def check_ewise_rscalar(ufunc):
    x = 10
    y = tf.placeholder(tf.float32)
    z = ufunc(x, y)
    ay = np.ones((2, 3))
    sess = tf.Session()
    az = sess.run(z, feed_dict={y: ay})
    np.testing.assert_almost_equal(az, ufunc(x, ay))


def test_ewise():
    check_ewise(lambda x, y: x + y)
    check_ewise(lambda x, y: x - y)
    check_ewise(lambda x, y: x * y)
    check_ewise(lambda x, y: x / y)
    check_ewise(lambda x, y: x ** y)
    check_ewise_scalar(lambda x, y: x + y)
    check_ewise_scalar(lambda x, y: x - y)
    check_ewise_scalar(lambda x, y: x * y)
    check_ewise_scalar(lambda x, y: x / y)
    check_ewise_rscalar(lambda x, y: x - y)
    check_ewise_rscalar(lambda x, y: x ** y)


@pytest.mark.parametrize("op, ref", [(tf.exp, np.exp), (tf.log, np.log), (tf.sqrt, np.sqrt)])
def test_unary(op, ref):
    x = tf.placeholder(tf.float32)
    y = op(x)
    ax = np.ones((2, 3)) * 2
    sess = tf.Session()
    ay = sess.run(y, feed_dict={x: ax})
    np.testing.assert_almost_equal(ay, ref(ax))


def test_softmax():
    x = tf.placeholder(tf.float32)
    y = tf.nn.softmax(x)
    ax = np.ones((2, 4))
    sess = tf.Session()
    ay = sess.run(y, feed_dict={x: ax})
    np.testing.assert_almost_equal(ay, ax / np.sum(ax, axis=1, keepdims=True))


def test_matmul():
    x = tf.placeholder(tf.float32)
    y = tf.placeholder(tf.float32)
    ax = np.ones((2, 3))
    ay = np.ones((3, 4)) * 4
    z = tf.matmul(x, y) * 4
    sess = tf.Session()
    az = sess.run(z, feed_dict={x: ax, y: ay})
    np.testing.assert_almost_equal(az, np.dot(ax, ay) * 4)


@pytest.mark.parametrize("op, ref", [(tf.reduce_sum, np.sum), (tf.reduce_mean, np.mean)])
def test_sum_mean(op, ref):
    axis = [1, 3]
    x = tf.placeholder(tf.float32)
    y = op(x, reduction_indices=axis)
    ax = np.random.uniform(size=(2, 4, 8, 7))
    sess = tf.Session()
    ay = sess.run(y, feed_dict={x: ax})
    npy = ref(ax, axis=tuple(axis))
    assert np.mean(np.abs(ay - npy)) < 1e-6


def test_argmax():
    x = tf.placeholder(tf.float32)
    y = tf.argmax(x, 1)
    ax = np.random.uniform(size=(700, 10))
    sess = tf.Session()
    ay = sess.run(y, feed_dict={x: ax})
    npy = np.argmax(ax, 1)
    assert np.mean(np.abs(ay - npy)) < 1e-6


def test_pad():
    out_filter = 10
    in_filter = 4
    pad_width = (out_filter - in_filter) // 2
    x = tf.placeholder(tf.float32)
    y = tf.pad(x, dim=1, pad=-pad_width)
    z = tf.pad(y, dim=1, pad=pad_width)
    nx = np.random.randn(100, 4, 28, 28)
    npy = np.pad(nx, ((0, 0), (pad_width, pad_width), (0, 0), (0, 0)), mode='constant', constant_values=0)
    sess = tf.Session()
    sess.run(tf.initialize_all_variables())
    ay = sess.run(z, feed_dict={x: nx})
    assert np.mean(np.abs(ay - npy)) < 1e-6


# ---- tinyflow's tests/python/test_gradients.py ----

def test_add_grad():
    x = tf.placeholder(tf.float32)
    y = tf.placeholder(tf.float32)
    ax = np.ones((2, 3))
    ay = np.ones((2, 3)) * 4
    z = x + y
    gx, gy = tf.gradients(z, [x, y])
    sess = tf.Session()
    agx = sess.run(gx, feed_dict={x: ax, y: ay})
    np.testing.assert_almost_equal(agx, np.ones((2, 3)))


def test_mul_grad():
    x = tf.placeholder(tf.float32)
    ax = np.ones((2, 3))
    z = x * 14
    gx = tf.gradients(z, [x])[0]
    sess = tf.Session()
    agx = sess.run(gx, feed_dict={x: ax})
    np.testing.assert_almost_equal(agx, np.ones((2, 3)) * 14)


@pytest.mark.parametrize("op, scale", [(tf.reduce_sum, 1.0), (tf.reduce_mean, 1 / 6.0)])
def test_sum_mean_grad(op, scale):
    x = tf.placeholder(tf.float32)
    ax = np.ones((2, 3))
    z = -op(x) * 14
    gx = tf.gradients(z, [x])[0]
    sess = tf.Session()
    agx = sess.run(gx, feed_dict={x: ax})
    np.testing.assert_almost_equal(agx, -np.ones((2, 3)) * 14 * scale)


def test_matmul_grad():
    x = tf.placeholder(tf.float32)
    y = tf.placeholder(tf.float32)
    ax = np.ones((2, 3))
    ay = np.ones((3, 4)) * 4
    z = tf.matmul(x, y) * 4
    gx, gy = tf.gradients(z, [x, y])
    sess = tf.Session()
    agx = sess.run(gx, feed_dict={x: ax, y: ay})
    agy = sess.run(gy, feed_dict={x: ax, y: ay})
    np.testing.assert_almost_equal(agx, np.dot(np.ones((2, 4)), ay.T) * 4)
    np.testing.assert_almost_equal(agy, np.dot(ax.T, np.ones((2, 4))) * 4)


# ---- tinyflow's tests/python/test_states.py ----

def test_assign():
    x = tf.Variable(tf.zeros(shape=[2, 3]))
    sess = tf.Session()
    sess.run(tf.assign(x, tf.zeros(shape=[2, 3])))
    ax = sess.run(x)
    np.testing.assert_almost_equal(ax, np.zeros((2, 3)))


def test_group():
    x1 = tf.Variable(tf.zeros(shape=[2, 3]))
    x2 = tf.Variable(tf.zeros(shape=[2, 3]))
    a1 = tf.assign(x1, tf.zeros(shape=[2, 3]))
    a2 = tf.assign(x2, tf.ones(shape=[2, 3]))
    sess = tf.Session()
    assert sess.run(tf.group(a1, a2)) is None
    ax1 = sess.run(x1)
    ax2 = sess.run(x2)
    np.testing.assert_almost_equal(ax1, np.zeros((2, 3)))
    np.testing.assert_almost_equal(ax2, np.ones((2, 3)))


def test_init():
    x1 = tf.Variable(tf.ones(shape=[2, 3]))
    x2 = tf.Variable(tf.zeros(shape=[2, 3]))
    sess = tf.Session()
    sess.run(tf.initialize_all_variables())
    ax1 = sess.run(x1)
    ax2 = sess.run(x2)
    np.testing.assert_almost_equal(ax1, np.ones((2, 3)))
    np.testing.assert_almost_equal(ax2, np.zeros((2, 3)))


# ---- tinyflow's faults, fixed ----

def test_two_criteria_keep_their_own_targets():
    """tinyflow kept the criterion's target in one Lua global: two criteria in one graph read
    the same labels."""
    z = tf.placeholder(tf.float32)
    y1, y2 = tf.placeholder(tf.float32), tf.placeholder(tf.float32)
    l1 = tf.nn.mean_sparse_softmax_cross_entropy_with_logits(z, y1)
    l2 = tf.nn.mean_sparse_softmax_cross_entropy_with_logits(z, y2)
    logits = np.log(np.array([[0.5, 0.25, 0.25], [0.1, 0.1, 0.8]]))
    a1, a2 = tf.Session().run([l1, l2], feed_dict={z: logits, y1: np.array([0, 2]), y2: np.array([1, 0])})
    np.testing.assert_allclose(a1, [-(np.log(0.5) + np.log(0.8)) / 2], rtol=1e-6)
    np.testing.assert_allclose(a2, [-(np.log(0.25) + np.log(0.1)) / 2], rtol=1e-6)


def test_reflected_division_and_square():
    """tinyflow had no 2 / x (__rdiv_scalar__) and no x ** 2 (__pow_scalar__)."""
    x = tf.placeholder(tf.float32)
    ax = np.array([[1.0, 2.0], [4.0, 0.5]])
    y = 2 / x + x ** 2
    gx, = tf.gradients(y, [x])
    sess = tf.Session()
    np.testing.assert_allclose(sess.run(y, feed_dict={x: ax}), 2 / ax + ax ** 2, rtol=1e-6)
    np.testing.assert_allclose(sess.run(gx, feed_dict={x: ax}), -2 / ax ** 2 + 2 * ax, rtol=1e-6)


def test_gradient_of_an_unconnected_input_is_zeros():
    x, y = tf.placeholder(tf.float32), tf.placeholder(tf.float32)
    gx, gy = tf.gradients(x * 3, [x, y])
    ax, ay = np.ones((2, 2)), np.ones((3, 1))
    agx, agy = tf.Session().run([gx, gy], feed_dict={x: ax, y: ay})
    np.testing.assert_array_equal(agx, 3 * ax)
    np.testing.assert_array_equal(agy, np.zeros((3, 1)))


# ---- the optimizers ----

def _softmax_regression(seed: int = 0):
    rng = np.random.default_rng(seed)
    xs = rng.standard_normal((8, 5)).astype(np.float32)
    ys = np.eye(3, dtype=np.float32)[rng.integers(0, 3, 8)]
    w0 = (rng.standard_normal((5, 3)) * 0.1).astype(np.float32)
    return xs, ys, w0


def _loss_and_grad(w, xs, ys):
    z = xs @ w
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    loss = -(ys * np.log(p)).sum(1).mean()
    return loss, xs.T @ (p - ys) / len(xs)


def test_gradient_descent_steps_match_numpy():
    xs, ys, w0 = _softmax_regression()
    x, y_ = tf.placeholder(tf.float32), tf.placeholder(tf.float32)
    W = tf.Variable(tf.zeros([5, 3]), name="gd_W")
    y = tf.nn.softmax(tf.matmul(x, W))
    loss = tf.reduce_mean(-tf.reduce_sum(y_ * tf.log(y), reduction_indices=[1]))
    step = tf.train.GradientDescentOptimizer(0.5).minimize(loss)
    assert [v.name for v in loss.list_input_variables()] == ["gd_W"]  # placeholders are no variables
    sess = tf.Session()
    sess.run(tf.assign(W, tf.zeros([5, 3])))
    sess.assign(W, w0)
    w = w0.astype(np.float64)
    for _ in range(3):
        got_loss, _ = sess.run([loss, step], feed_dict={x: xs, y_: ys})
        want_loss, g = _loss_and_grad(w, xs.astype(np.float64), ys)
        np.testing.assert_allclose(got_loss, [want_loss], rtol=1e-5)
        w -= 0.5 * g
        np.testing.assert_allclose(sess.run(W), w, rtol=1e-4, atol=1e-6)


def test_adam_steps_match_numpy():
    """tinyflow's Adam: lr_t = lr sqrt(1 - b2^t) / (1 - b1^t), var -= lr_t m / (sqrt(v) + eps)."""
    xs, ys, w0 = _softmax_regression(1)
    x, y_ = tf.placeholder(tf.float32), tf.placeholder(tf.float32)
    W = tf.Variable(tf.zeros([5, 3]), name="adam_W")
    y = tf.nn.softmax(tf.matmul(x, W))
    loss = tf.reduce_mean(-tf.reduce_sum(y_ * tf.log(y), reduction_indices=[1]))
    opt = tf.train.AdamOptimizer(0.01, name="adam_test")
    step = opt.minimize(loss)
    sess = tf.Session()
    sess.run(tf.initialize_all_variables())
    sess.assign(W, w0)
    w, m, v = w0.astype(np.float64), 0.0, 0.0
    for t in range(1, 4):
        sess.run(step, feed_dict={x: xs, y_: ys})
        _, g = _loss_and_grad(w, xs.astype(np.float64), ys)
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        lr_t = 0.01 * np.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t)
        w = w - lr_t * m / (np.sqrt(v) + 1e-4)
        np.testing.assert_allclose(sess.run(W), w, rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(sess.run(opt.t), [3])


def test_mlp_trains_with_shape_inference():
    """tinyflow's example/mnist_mlp_auto_shape_inference.py on a small separable problem."""
    luabridge.require("torch").manualSeed(3)  # tf.normal's draws
    rng = np.random.default_rng(3)
    centers = rng.standard_normal((4, 10)) * 3
    labels = rng.integers(0, 4, 200)
    data = (centers[labels] + rng.standard_normal((200, 10))).astype(np.float32)

    x = tf.placeholder(tf.float32)
    fc1 = tf.nn.linear(x, num_hidden=16, name="mlp_fc1", no_bias=False)
    fc2 = tf.nn.linear(tf.nn.relu(fc1), num_hidden=4, name="mlp_fc2")
    label = tf.placeholder(tf.float32)
    cross_entropy = tf.nn.mean_sparse_softmax_cross_entropy_with_logits(fc2, label)
    train_step = tf.train.GradientDescentOptimizer(0.1).minimize(cross_entropy)
    sess = tf.Session()
    init = [tf.assign(v, tf.normal(shape, 0.1))
            for v, _, shape in tf.infer_variable_shapes(cross_entropy, feed_dict={x: [50, 10], label: [50]})]
    sess.run(init)
    losses = []
    for i in range(40):
        b = slice(50 * (i % 4), 50 * (i % 4) + 50)
        loss, _ = sess.run([cross_entropy, train_step], feed_dict={x: data[b], label: labels[b]})
        losses.append(float(loss[0]))
    accuracy = tf.reduce_mean(tf.equal(tf.argmax(fc2, 1), label))
    assert losses[-1] < losses[0] / 4
    assert sess.run(accuracy, feed_dict={x: data, label: labels})[0] > 0.95


def test_placeholder_shape_and_dtype_codes():
    x = tf.placeholder(tf.float32, [None, 3])   # unknown sizes are not recorded
    y = tf.placeholder(tf.float32, [2, 3], name="fixed")
    assert y.attr("shape") == "[2,3]" and x.attr("shape") is None and y.attr("dtype") == "0"
    sess = tf.Session()
    np.testing.assert_array_equal(sess.run(x * 2, feed_dict={x: np.ones((5, 3))}), 2 * np.ones((5, 3)))
    with pytest.raises(ValueError, match="fixed"):
        sess.run(y * 2, feed_dict={y: np.ones((5, 3))})


def test_session_gpu_config_runs_where_there_is_no_gpu_path():
    with pytest.warns(RuntimeWarning, match="running on the CPU"):
        sess = tf.Session(config="gpu")
    x = tf.placeholder(tf.float32)
    np.testing.assert_array_equal(sess.run(x + 1, feed_dict={x: np.zeros(2)}), [1, 1])


def test_resnet_blocks_train():
    """tinyflow's example/cifar_resnet.py structure, small: SAME convolutions, batch
    normalization, residual sums, a 1x1 projection and average pooling, trained with Adam."""
    def conv_factory(x, filter_size, out_filters):
        x = tf.nn.conv2d(x, num_filter=out_filters, ksize=[1, filter_size, filter_size, 1], padding='SAME')
        return tf.nn.relu(tf.nn.batch_normalization(x))

    def residual_factory(x, in_filters, out_filters):
        conv2 = conv_factory(conv_factory(x, 3, out_filters), 3, out_filters)
        shortcut = x if in_filters == out_filters else conv_factory(x, 1, out_filters)
        return tf.nn.relu(shortcut + conv2)

    luabridge.require("torch").manualSeed(0)  # tf.normal's draws
    rng = np.random.default_rng(5)
    images = rng.standard_normal((16, 3, 8, 8)).astype(np.float32)
    labels = rng.integers(0, 3, 16).astype(np.float32)
    images[:, 0] += labels[:, None, None]  # learnable: the class shifts channel 0
    x, label = tf.placeholder(tf.float32), tf.placeholder(tf.float32)
    net = residual_factory(residual_factory(tf.tanh(tf.nn.conv2d(x, num_filter=4, ksize=[1, 3, 3, 1],
                                                                 padding='SAME')), 4, 4), 4, 8)
    pool = tf.nn.avg_pool(net, ksize=[1, 4, 4, 1], strides=[1, 2, 2, 1], padding='SAME', data_format='NCHW')
    fc = tf.nn.linear(tf.nn.flatten_layer(pool), num_hidden=3, name="resnet_fc")
    loss = tf.nn.mean_sparse_softmax_cross_entropy_with_logits(fc, label)
    train_step = tf.train.AdamOptimizer(0.01, name="resnet_adam").minimize(loss)
    sess = tf.Session()
    shapes = {n: s for _, n, s in tf.infer_variable_shapes(loss, feed_dict={x: [16, 3, 8, 8], label: [16]})}
    assert shapes["resnet_fc_weight"] == [3, 8 * 4 * 4]
    sess.run([tf.assign(v, tf.normal(s, 0.1)) for v, _, s in tf.infer_variable_shapes(
        loss, feed_dict={x: [16, 3, 8, 8], label: [16]})])
    sess.run(tf.initialize_all_variables())
    losses = [float(sess.run([loss, train_step], feed_dict={x: images, label: labels})[0][0]) for _ in range(30)]
    assert losses[-1] < losses[0] / 3
