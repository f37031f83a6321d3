"""nn layers: Linear, pointwise activations, softmax family, View, Reshape, Dropout."""
from __future__ import annotations

import numpy as np
import pytest

import luabridge
from nn_layers_check import backward, call, check_gradients, field, forward, lua_tensor, module


def test_linear_forward_batch_and_single(rng):
    m = module("nn.Linear(5, 3)")
    w, b = field(m, "weight"), field(m, "bias")
    x = rng.standard_normal((4, 5))
    np.testing.assert_allclose(forward(m, x), x @ w.T + b, rtol=1e-12)
    np.testing.assert_allclose(forward(m, x[1].copy()), x[1] @ w.T + b, rtol=1e-12)
    xt = rng.standard_normal((5, 4)).T  # non-contiguous batch
    np.testing.assert_allclose(forward(m, xt), xt @ w.T + b, rtol=1e-12)


def test_linear_gradients(rng):
    m = module("nn.Linear(4, 3)")
    check_gradients(m, rng.standard_normal((2, 4)), ("weight", "bias"), rng)
    check_gradients(m, rng.standard_normal(4), ("weight", "bias"), rng)


def test_linear_no_bias(rng):
    m = module("nn.Linear(4, 2, false)")
    assert m.bias is None
    m2 = module("nn.Linear(4, 2):noBias()")
    assert m2.bias is None and m2.gradBias is None
    x = rng.standard_normal((3, 4))
    np.testing.assert_allclose(forward(m2, x), x @ field(m2, "weight").T, rtol=1e-12)
    check_gradients(m2, x, ("weight",), rng)
    assert str(m2) == "nn.Linear(4 -> 2) without bias"
    assert str(m) == "nn.Linear(4 -> 2) without bias"
    assert str(module("nn.Linear(4, 2)")) == "nn.Linear(4 -> 2)"


def test_linear_reset_bounds():
    m = module("nn.Linear(16, 300)")
    w, b = field(m, "weight"), field(m, "bias")
    assert np.abs(w).max() <= 0.25 and np.abs(w).max() > 0.24
    assert np.abs(b).max() <= 0.25 and abs(w.mean()) < 0.01
    call("function(m) m:reset(0.1) end", m)
    assert np.abs(w).max() <= 0.1 * np.sqrt(3) and np.abs(w).max() > 0.16


def test_linear_acc_scale_and_accumulation(rng):
    m = module("nn.Linear(3, 2)")
    x, g = rng.standard_normal((5, 3)), rng.standard_normal((5, 2))
    backward(m, x, g)
    call("function(m, x, g) m:accGradParameters(x, g, 0.5) end", m, lua_tensor(x), lua_tensor(g))
    np.testing.assert_allclose(field(m, "gradWeight"), 1.5 * g.T @ x, rtol=1e-12)
    np.testing.assert_allclose(field(m, "gradBias"), 1.5 * g.sum(0), rtol=1e-12)


def test_linear_errors(lua):
    m = module("nn.Linear(4, 3)")
    with pytest.raises(luabridge.LuaError, match=r"nn.Linear: size mismatch, input size 2x5 does not match inputSize 4"):
        forward(m, np.zeros((2, 5)))
    with pytest.raises(luabridge.LuaError, match=r"nn.Linear: input must be a vector or a matrix, got 2x2x4"):
        forward(m, np.zeros((2, 2, 4)))
    with pytest.raises(luabridge.LuaError, match=r"gradOutput size 2x4 does not match output size 2x3"):
        backward(m, np.zeros((2, 4)), np.zeros((2, 4)))


# (constructor, numpy reference, input sampler)
def _normal(rng, shape):
    return rng.standard_normal(shape) * 2


def _positive(rng, shape):
    return rng.uniform(0.2, 3, shape)


def _away_from(points, scale=1.0):
    """Inputs in [-3, 3] * scale at least 0.05 from each kink in points, so that finite
    differences are exact."""
    def sample(rng, shape):
        x = rng.uniform(-3, 3, shape) * scale
        for p in points:
            near = np.abs(x - p) < 0.05
            x[near] = p + 0.1
        return x
    return sample


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


POINTWISE = [
    ("nn.Threshold(0.5, -2)", lambda x: np.where(x > 0.5, x, -2.0), _away_from([0.5])),
    ("nn.ReLU()", lambda x: np.maximum(x, 0), _away_from([0])),
    ("nn.HardTanh()", lambda x: np.clip(x, -1, 1), _away_from([-1, 1])),
    ("nn.HardTanh(-0.5, 2)", lambda x: np.clip(x, -0.5, 2), _away_from([-0.5, 2])),
    ("nn.Clamp(-2, 0.3)", lambda x: np.clip(x, -2, 0.3), _away_from([-2, 0.3])),
    ("nn.ReLU6()", lambda x: np.clip(x, 0, 6), _away_from([0, 6], scale=3)),
    ("nn.LeakyReLU()", lambda x: np.where(x > 0, x, 0.01 * x), _away_from([0])),
    ("nn.LeakyReLU(0.3)", lambda x: np.where(x > 0, x, 0.3 * x), _away_from([0])),
    ("nn.ELU()", lambda x: np.where(x > 0, x, np.exp(x) - 1), _away_from([0])),
    ("nn.ELU(0.5)", lambda x: np.where(x > 0, x, 0.5 * (np.exp(x) - 1)), _away_from([0])),
    ("nn.Tanh()", np.tanh, _normal),
    ("nn.Sigmoid()", _sigmoid, _normal),
    ("nn.Exp()", np.exp, _normal),
    ("nn.Log()", np.log, _positive),
    ("nn.Abs()", np.abs, _away_from([0])),
    ("nn.Square()", np.square, _normal),
    ("nn.Sqrt()", np.sqrt, _positive),
    ("nn.Sqrt(0.5)", lambda x: np.sqrt(x + 0.5), _positive),
    ("nn.Power(3)", lambda x: x ** 3, _normal),
    ("nn.Power(0.5)", np.sqrt, _positive),
    ("nn.SoftSign()", lambda x: x / (1 + np.abs(x)), _away_from([0])),
    ("nn.LogSigmoid()", lambda x: np.log(_sigmoid(x)), _normal),
    ("nn.TanhShrink()", lambda x: x - np.tanh(x), _normal),
    ("nn.HardShrink()", lambda x: np.where(np.abs(x) > 0.5, x, 0), _away_from([-0.5, 0.5])),
    ("nn.HardShrink(1.5)", lambda x: np.where(np.abs(x) > 1.5, x, 0), _away_from([-1.5, 1.5])),
    ("nn.SoftShrink()", lambda x: np.sign(x) * np.maximum(np.abs(x) - 0.5, 0), _away_from([-0.5, 0.5])),
    ("nn.SoftPlus()", lambda x: np.log1p(np.exp(x)), _normal),
    ("nn.SoftPlus(2)", lambda x: np.log1p(np.exp(2 * x)) / 2, _normal),
    # torch7 tests the threshold on the output in backward: keep x out of (log(e - 1), 1]
    ("nn.SoftPlus(1, 1)", lambda x: np.where(x > 1, x, np.log1p(np.exp(x))), _away_from([0.5, 0.6, 0.7, 0.8, 0.9, 1])),
]


@pytest.mark.parametrize("ctor,ref,sample", POINTWISE, ids=[p[0] for p in POINTWISE])
def test_pointwise(ctor, ref, sample, rng):
    x = sample(rng, (3, 4))
    m = module(ctor)
    np.testing.assert_allclose(forward(m, x), ref(x), rtol=1e-12, atol=1e-14)
    # non-contiguous input and a 3D one
    xt = sample(rng, (4, 3)).T
    np.testing.assert_allclose(forward(m, xt), ref(xt), rtol=1e-12, atol=1e-14)
    check_gradients(m, x, (), rng)
    check_gradients(m, sample(rng, (2, 2, 3)), (), rng)
    assert forward(m, np.zeros((0, 3))).shape == (0, 3)


INPLACE = ["nn.Threshold(0.5, 0.1, true)", "nn.ReLU(true)", "nn.HardTanh(-1, 1, true)",
           "nn.ReLU6(true)", "nn.LeakyReLU(0.2, true)", "nn.ELU(1, true)"]


@pytest.mark.parametrize("ctor", INPLACE)
def test_pointwise_in_place(ctor, rng):
    m, ref = module(ctor), module(ctor.replace(", true)", ")").replace("(true)", "()"))
    assert not ref.inplace and m.inplace
    x = _away_from([-1, 0, 0.1, 0.5, 1])(rng, (3, 5)) * 2.5
    x0 = x.copy()
    g = rng.standard_normal(x.shape)
    want, want_grad = forward(ref, x0), backward(ref, x0, g)
    out = forward(m, x)
    np.testing.assert_allclose(out, want, rtol=1e-12)
    np.testing.assert_allclose(x, want, rtol=1e-12)  # the input itself was overwritten
    g2 = g.copy()
    np.testing.assert_allclose(backward(m, x, g2), want_grad, rtol=1e-12)
    np.testing.assert_allclose(g2, want_grad, rtol=1e-12)


def test_pointwise_errors(lua):
    with pytest.raises(luabridge.LuaError, match=r"gradOutput size 5 \(5 elements\) does not match input size 2x3"):
        backward(module("nn.Tanh()"), np.zeros((2, 3)), np.zeros(5))
    with pytest.raises(luabridge.LuaError, match=r"nn.ReLU: input must be a tensor"):
        call("function(m) return m:forward(3) end", module("nn.ReLU()"))
    with pytest.raises(luabridge.LuaError, match=r"in-place processing requires value \(2\) not exceed threshold \(1\)"):
        module("nn.Threshold(1, 2, true)")
    with pytest.raises(luabridge.LuaError, match="max_value must be larger than min_value"):
        module("nn.HardTanh(1, -1)")


def test_logsigmoid_extremes():
    x = np.array([-800.0, -30, 0, 30, 800])
    np.testing.assert_allclose(forward(module("nn.LogSigmoid()"), x),
                               [-800, -30, -np.log(2), -np.exp(-30), 0], rtol=1e-9, atol=1e-300)


def _softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


SOFTMAX = [("nn.SoftMax()", lambda x, a: _softmax(x, a)),
           ("nn.SoftMin()", lambda x, a: _softmax(-x, a)),
           ("nn.LogSoftMax()", lambda x, a: np.log(_softmax(x, a))),
           ("nn.SpatialSoftMax()", lambda x, a: _softmax(x, a)),
           ("nn.SpatialLogSoftMax()", lambda x, a: np.log(_softmax(x, a)))]


@pytest.mark.parametrize("ctor,ref", SOFTMAX, ids=[s[0] for s in SOFTMAX])
@pytest.mark.parametrize("shape,axis", [((5,), 0), ((3, 5), 1), ((4, 2, 3), 0), ((2, 4, 2, 3), 1)])
def test_softmax_family(ctor, ref, shape, axis, rng):
    m = module(ctor)
    x = rng.standard_normal(shape) * 3
    np.testing.assert_allclose(forward(m, x), ref(x, axis), rtol=1e-10, atol=1e-15)
    check_gradients(m, x, (), rng)


def test_softmax_large_values_and_errors(rng):
    x = np.array([[1000.0, 1001, 999], [-1000, -1000, -1000]])
    np.testing.assert_allclose(forward(module("nn.SoftMax()"), x), _softmax(x, 1), rtol=1e-12)
    np.testing.assert_allclose(forward(module("nn.LogSoftMax()"), x), x - x.max(1, keepdims=True)
                               - np.log(np.exp(x - x.max(1, keepdims=True)).sum(1, keepdims=True)))
    xt = rng.standard_normal((6, 3)).T
    np.testing.assert_allclose(forward(module("nn.LogSoftMax()"), xt), np.log(_softmax(xt, 1)), rtol=1e-10)
    with pytest.raises(luabridge.LuaError, match=r"nn.SoftMax: 1D, 2D, 3D or 4D tensor expected, got 1x1x1x1x2"):
        forward(module("nn.SoftMax()"), np.zeros((1, 1, 1, 1, 2)))
    with pytest.raises(luabridge.LuaError, match=r"nn.LogSoftMax: gradOutput size 3x2 does not match input size 2x3"):
        m = module("nn.LogSoftMax()")
        forward(m, np.zeros((2, 3)))
        backward(m, np.zeros((2, 3)), np.zeros((3, 2)))


@pytest.mark.parametrize("ctor,shape,want", [
    ("nn.View(6)", (2, 3), (6,)),
    ("nn.View(6)", (4, 2, 3), (4, 6)),
    ("nn.View(3, 2)", (6,), (3, 2)),
    ("nn.View(-1, 2)", (2, 6), (6, 2)),
    ("nn.View(torch.LongStorage{3, -1})", (2, 6), (3, 4)),
    ("nn.View(6):setNumInputDims(2)", (1, 2, 3), (1, 6)),
    ("nn.View(6):setNumInputDims(2)", (2, 3), (6,)),
    ("nn.View(-1):setNumInputDims(2)", (5, 2, 3), (5, 6)),
    ("nn.View(2, -1):setNumInputDims(3)", (4, 2, 3, 2), (4, 2, 6)),
])
def test_view(ctor, shape, want, rng):
    m = module(ctor)
    x = rng.standard_normal(shape)
    out = forward(m, x)
    np.testing.assert_array_equal(out, x.reshape(want))
    g = rng.standard_normal(want)
    np.testing.assert_array_equal(backward(m, x, g), g.reshape(shape))


def test_view_reset_and_errors(rng):
    m = module("nn.View(4)")
    with pytest.raises(luabridge.LuaError, match=r"nn.View: input view \(2x3\) and desired view \(4\) do not match"):
        forward(m, np.zeros((2, 3)))
    call("function(m) m:resetSize(3, 2) end", m)
    assert forward(m, np.zeros((2, 3))).shape == (3, 2)
    with pytest.raises(luabridge.LuaError, match="only one dimension can be at -1"):
        module("nn.View(-1, -1)")
    assert str(module("nn.View(2, -1)")) == "nn.View(2, -1)"


@pytest.mark.parametrize("ctor,shape,want", [
    ("nn.Reshape(6)", (2, 3), (6,)),
    ("nn.Reshape(6)", (4, 2, 3), (4, 6)),
    ("nn.Reshape(6)", (1, 6), (1, 6)),
    ("nn.Reshape(3, 2)", (6,), (3, 2)),
    ("nn.Reshape(3, 2, true)", (1, 6), (1, 3, 2)),
    ("nn.Reshape(2, 3, false)", (3, 2), (2, 3)),
    ("nn.Reshape(torch.LongStorage{2, 2})", (3, 4), (3, 2, 2)),
])
def test_reshape(ctor, shape, want, rng):
    m = module(ctor)
    x = rng.standard_normal(shape)
    np.testing.assert_array_equal(forward(m, x), x.reshape(want))
    xt = rng.standard_normal(shape[::-1]).T  # non-contiguous: copied first
    np.testing.assert_array_equal(forward(m, xt), xt.reshape(want))
    g = rng.standard_normal(want)
    np.testing.assert_array_equal(backward(m, xt, g), g.reshape(shape))


def test_reshape_errors():
    with pytest.raises(luabridge.LuaError, match=r"nn.Reshape: input size 2x4 \(8 elements\) cannot be reshaped to 2x3"):
        forward(module("nn.Reshape(3)"), np.zeros((2, 4)))


def test_dropout_train_v2(rng):
    m = module("nn.Dropout(0.25)")
    x = rng.uniform(1, 2, (200, 50))
    out = forward(m, x)
    kept = out != 0
    assert abs(kept.mean() - 0.75) < 0.02
    np.testing.assert_allclose(out[kept], x[kept] / 0.75, rtol=1e-12)
    g = rng.standard_normal(x.shape)
    np.testing.assert_allclose(backward(m, x, g), np.where(kept, g / 0.75, 0), rtol=1e-12)


def test_dropout_v1_evaluate_and_stochastic(rng):
    x = rng.uniform(1, 2, (40, 30))
    m = module("nn.Dropout(0.4, true)")
    out = forward(m, x)
    np.testing.assert_allclose(out[out != 0], x[out != 0], rtol=1e-12)
    call("function(m) m:evaluate() end", m)
    np.testing.assert_allclose(forward(m, x), 0.6 * x, rtol=1e-12)
    np.testing.assert_allclose(backward(m, x, x), 0.6 * x, rtol=1e-12)
    m2 = module("nn.Dropout(0.4)")
    call("function(m) m:evaluate() end", m2)
    np.testing.assert_array_equal(forward(m2, x), x)
    m3 = module("nn.Dropout(0.5, false, false, true)")
    call("function(m) m:evaluate() end", m3)
    out3 = forward(m3, x)
    assert 0.3 < (out3 == 0).mean() < 0.7
    np.testing.assert_allclose(out3[out3 != 0], 2 * x[out3 != 0], rtol=1e-12)


def test_dropout_in_place_and_errors(rng):
    x = rng.uniform(1, 2, (10, 10))
    x0 = x.copy()
    m = module("nn.Dropout(0.5, false, true)")
    out = forward(m, x)
    np.testing.assert_array_equal(x, out)
    np.testing.assert_allclose(out[out != 0], 2 * x0[out != 0])
    with pytest.raises(luabridge.LuaError, match=r"illegal percentage, must be 0 <= p < 1"):
        module("nn.Dropout(1)")
    assert str(module("nn.Dropout(0.5)")) == "nn.Dropout(0.500000)"


@pytest.mark.parametrize("name, grad", [
    ("Sigmoid", lambda y, g: g * (1 - y) * y),
    ("Tanh", lambda y, g: g * (1 - y * y)),
    ("SoftSign", None),
])
def test_activation_gradients_on_a_narrowed_input(rng, name, grad):
    """Backward bodies that never read the input loop over gradInput, gradOutput and output only:
    a narrowed (strided) input, as an LSTM's gates, gives the same gradients."""
    m = module(f"nn.{name}()")
    wide = rng.standard_normal((6, 20))
    got_out, got_grad = luabridge.eval("""function(m, wide, g)
      local x = wide:narrow(2, 3, 8)
      local y = m:forward(x):clone()
      return y, m:backward(x, g):clone()
    end""")(m, lua_tensor(wide), lua_tensor(g := rng.standard_normal((6, 8))))
    x = wide[:, 2:10]
    y = {"Sigmoid": lambda: 1 / (1 + np.exp(-x)), "Tanh": lambda: np.tanh(x), "SoftSign": lambda: x / (1 + np.abs(x))}[name]()
    np.testing.assert_allclose(luabridge.to_numpy(got_out), y, rtol=1e-12)
    want = grad(y, g) if grad else g / (1 + np.abs(x)) ** 2
    np.testing.assert_allclose(luabridge.to_numpy(got_grad), want, rtol=1e-12)
