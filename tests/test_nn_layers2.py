"""nn layers: shape modules, reductions, learned elementwise layers, distances, embeddings,
batch normalization, products of tables."""
from __future__ import annotations

import numpy as np
import pytest

import luabridge
from nn_layers_check import (backward, call, check_gradients, check_pair_gradients, field, forward,
                             lua_tensor, module, pair)


def _sig(x):
    return 1 / (1 + np.exp(-x))


def _l2n(x, p, eps=1e-10):
    rows = x.reshape(1, -1) if x.ndim == 1 else x
    n = (np.abs(rows) ** p).sum(1, keepdims=True) + eps
    return (rows / n ** (1 / p)).reshape(x.shape)


# (constructor, input shape, reference(x, module), parameters checked by finite differences)
SINGLE = [
    ("nn.MulConstant(-2.5)", (3, 4), lambda x, m: -2.5 * x, ()),
    ("nn.AddConstant(1.5)", (3, 4), lambda x, m: x + 1.5, ()),
    ("nn.GradientReversal(0.5)", (5,), lambda x, m: x, None),  # gradient is not the derivative
    ("nn.Contiguous()", (2, 3), lambda x, m: x, ()),
    ("nn.Copy()", (2, 3), lambda x, m: x, ()),
    ("nn.Copy('torch.DoubleTensor', 'torch.DoubleTensor', true)", (2, 3), lambda x, m: x, ()),
    ("nn.Narrow(2, 2, 3)", (3, 5), lambda x, m: x[:, 1:4], ()),
    ("nn.Narrow(1, 2, -2)", (5, 2), lambda x, m: x[1:4], ()),
    ("nn.Narrow(-1, 3)", (2, 4), lambda x, m: x[:, 2:3], ()),
    ("nn.Select(2, 3)", (3, 4, 2), lambda x, m: x[:, 2], ()),
    ("nn.Select(-1, -1)", (3, 4), lambda x, m: x[:, -1], ()),
    ("nn.Squeeze()", (2, 1, 3, 1), lambda x, m: x.reshape(2, 3), ()),
    ("nn.Squeeze(2)", (2, 1, 1), lambda x, m: x.reshape(2, 1), ()),
    ("nn.Squeeze(1, 2)", (4, 1, 3), lambda x, m: x.reshape(4, 3), ()),
    ("nn.Squeeze(nil, 2)", (1, 3, 1), lambda x, m: x.reshape(1, 3), ()),
    ("nn.Unsqueeze(2)", (3, 4), lambda x, m: x[:, None], ()),
    ("nn.Unsqueeze(3)", (3, 4), lambda x, m: x[:, :, None], ()),
    ("nn.Unsqueeze(1, 1)", (3, 4), lambda x, m: x[:, None], ()),
    ("nn.Transpose({1, 2})", (3, 4), lambda x, m: x.T, ()),
    ("nn.Transpose({1, 3}, {2, 3})", (2, 3, 4), lambda x, m: x.transpose(2, 0, 1), ()),
    ("nn.Transpose({1, 2}):setNumInputDims(2)", (5, 2, 3), lambda x, m: x.transpose(0, 2, 1), ()),
    ("nn.Padding(1, 2)", (3, 2), lambda x, m: np.concatenate([x, np.zeros((2, 2))]), ()),
    ("nn.Padding(1, -2, nil, 7)", (3, 2), lambda x, m: np.concatenate([np.full((2, 2), 7.0), x]), ()),
    ("nn.Padding(1, -1, 1, 0, 2)", (2, 3), lambda x, m: np.insert(x, 1, 0.0, axis=1), ()),
    ("nn.Padding(2, 1, 2, -1, 2)", (3, 4), lambda x, m: np.insert(x, 3, -1.0, axis=1), ()),
    ("nn.Replicate(3)", (2, 4), lambda x, m: np.broadcast_to(x, (3, 2, 4)), ()),
    ("nn.Replicate(2, 2)", (4, 3), lambda x, m: np.broadcast_to(x[:, None], (4, 2, 3)), ()),
    ("nn.Replicate(2, 1, 1)", (4, 3), lambda x, m: np.broadcast_to(x[:, None], (4, 2, 3)), ()),
    ("nn.Sum()", (3, 4), lambda x, m: x.sum(0), ()),
    ("nn.Sum(2)", (3, 4, 2), lambda x, m: x.sum(1), ()),
    ("nn.Sum(-1)", (3, 4), lambda x, m: x.sum(1), ()),
    ("nn.Sum(1, 1)", (3, 4), lambda x, m: x.sum(1), ()),
    ("nn.Sum(1, nil, true, false)", (3, 4), lambda x, m: x.mean(0, keepdims=True), ()),
    ("nn.Mean(2)", (3, 4), lambda x, m: x.mean(1), ()),
    ("nn.Mean(1, 2)", (5, 3, 4), lambda x, m: x.mean(1), ()),
    ("nn.Max(2)", (3, 4), lambda x, m: x.max(1), ()),
    ("nn.Max(1)", (5,), lambda x, m: x.max(0, keepdims=True), ()),
    ("nn.Min(1, 2)", (5, 3, 4), lambda x, m: x.min(1), ()),
    ("nn.Mul()", (3, 4), lambda x, m: x * field(m, "weight")[0], ("weight",)),
    ("nn.CMul(4)", (3, 4), lambda x, m: x * field(m, "weight"), ("weight",)),
    ("nn.CMul(4)", (4,), lambda x, m: x * field(m, "weight"), ("weight",)),
    ("nn.CMul(1, 3, 1)", (2, 3, 4), lambda x, m: x * field(m, "weight"), ("weight",)),
    ("nn.CMul(2, 3)", (4, 2, 3), lambda x, m: x * field(m, "weight"), ("weight",)),
    ("nn.CMul(2, 3)", (3, 2), lambda x, m: (x.reshape(2, 3) * field(m, "weight")).reshape(3, 2), ("weight",)),
    ("nn.Add(4)", (3, 4), lambda x, m: x + field(m, "bias"), ("bias",)),
    ("nn.Add(4)", (4,), lambda x, m: x + field(m, "bias"), ("bias",)),
    ("nn.Add(4, true)", (3, 4), lambda x, m: x + field(m, "bias")[0], ("bias",)),
    ("nn.CAdd(3)", (2, 3), lambda x, m: x + field(m, "bias"), ("bias",)),
    ("nn.CAdd(1, 4)", (3, 4), lambda x, m: x + field(m, "bias"), ("bias",)),
    ("nn.CAdd(2, 1, 2)", (2, 3, 2), lambda x, m: x + field(m, "bias"), ("bias",)),
    ("nn.CAdd(2, 2)", (3, 2, 2), lambda x, m: x + field(m, "bias"), ("bias",)),
    ("nn.PReLU()", (3, 4), lambda x, m: np.where(x > 0, x, 0.25 * x), ("weight",)),
    ("nn.PReLU(3)", (2, 3, 2, 2), None, ("weight",)),
    ("nn.PReLU(3)", (3,), None, ("weight",)),
    ("nn.GatedLinearUnit()", (3, 4), lambda x, m: x[:, :2] * _sig(x[:, 2:]), ()),
    ("nn.GatedLinearUnit(1)", (4, 3), lambda x, m: x[:2] * _sig(x[2:]), ()),
    ("nn.CReLU(1)", (3, 4), lambda x, m: np.concatenate([np.maximum(x, 0), np.maximum(-x, 0)], 1), ()),
    ("nn.CReLU(3)", (2, 2, 3), lambda x, m: np.concatenate([np.maximum(x, 0), np.maximum(-x, 0)], 0), ()),
    ("nn.Normalize(2)", (3, 4), lambda x, m: _l2n(x, 2), ()),
    ("nn.Normalize(1.5)", (4,), lambda x, m: _l2n(x, 1.5), ()),
    ("nn.Normalize(3)", (2, 5), lambda x, m: _l2n(x, 3), ()),
    ("nn.Normalize(math.huge)", (3, 4),
     lambda x, m: x / (np.abs(x).max(1, keepdims=True) + 1e-10), ()),
    ("nn.Euclidean(4, 3)", (2, 4),
     lambda x, m: np.linalg.norm(x[:, :, None] - field(m, "weight")[None], axis=1), ("weight",)),
    ("nn.Euclidean(4, 3)", (4,), lambda x, m: np.linalg.norm(x[:, None] - field(m, "weight"), axis=0), ("weight",)),
    ("nn.WeightedEuclidean(4, 3)", (2, 4), None, ("weight", "diagCov")),
    ("nn.Cosine(4, 3)", (2, 4), lambda x, m: (x @ field(m, "weight").T) / np.outer(
        np.linalg.norm(x, axis=1) + 1e-12, np.linalg.norm(field(m, "weight"), axis=1) + 1e-12), ("weight",)),
    ("nn.Cosine(4, 3)", (4,), lambda x, m: (field(m, "weight") @ x) / (
        np.linalg.norm(x) + 1e-12) / (np.linalg.norm(field(m, "weight"), axis=1) + 1e-12), ("weight",)),
    ("nn.Maxout(4, 3, 2)", (5, 4), None, ()),
]


def _prelu_ref(x, w):
    shape = [1] * x.ndim
    shape[1 if x.ndim > 1 else 0] = -1
    return np.where(x > 0, x, w.reshape(shape) * x)


@pytest.mark.parametrize("ctor,shape,ref,params", SINGLE,
                         ids=[f"{s[0]}-{'x'.join(map(str, s[1]))}" for s in SINGLE])
def test_single_input_modules(ctor, shape, ref, params, rng):
    m = module(ctor)
    x = rng.standard_normal(shape)
    if ctor.startswith("nn.PReLU("):
        field(m, "weight")[:] = rng.uniform(0.1, 0.5, field(m, "weight").shape)
        ref = lambda x, m: _prelu_ref(x, field(m, "weight"))  # noqa: E731
    if ctor.startswith("nn.WeightedEuclidean"):
        field(m, "diagCov")[:] = rng.uniform(0.5, 2, (4, 3))
        ref = lambda x, m: np.linalg.norm(  # noqa: E731
            (x[:, :, None] - field(m, "weight")[None]) * field(m, "diagCov")[None], axis=1)
    if ctor.startswith("nn.Maxout"):
        lin = m.modules[1]
        ref = lambda x, m: (x @ field(lin, "weight").T + field(lin, "bias")).reshape(5, 2, 3).max(1)  # noqa: E731
        params = ()
    out = forward(m, x)
    np.testing.assert_allclose(out, ref(x, m), rtol=1e-10, atol=1e-12)
    if "nn.Max" in ctor or "nn.Min" in ctor or "Normalize(math.huge)" in ctor or "Maxout" in ctor:
        x = x + np.arange(x.size).reshape(x.shape) * 0.01  # no ties within a finite step
    if params is not None:
        check_gradients(m, x, params, rng)


def test_modules_on_transposed_inputs(rng):
    for ctor, ref in [("nn.CMul(3, 4)", lambda x, m: x * field(m, "weight")),
                      ("nn.CAdd(3, 1)", lambda x, m: x + field(m, "bias")),
                      ("nn.Sum(2)", lambda x, m: x.sum(1)),
                      ("nn.Normalize(2)", lambda x, m: _l2n(x, 2)),
                      ("nn.Narrow(1, 2, 2)", lambda x, m: x[1:3]),
                      ("nn.PReLU(4)", lambda x, m: np.where(x > 0, x, 0.25 * x))]:
        x = rng.standard_normal((4, 3)).T  # 3 x 4, not contiguous
        m = module(ctor)
        np.testing.assert_allclose(forward(m, x), ref(x, m), rtol=1e-12, atol=1e-14, err_msg=ctor)


def test_in_place_constants_restore_input(rng):
    for ctor, f in [("nn.MulConstant(3, true)", lambda x: 3 * x), ("nn.AddConstant(-2, true)", lambda x: x - 2)]:
        m = module(ctor)
        x = rng.standard_normal((3, 2))
        x0 = x.copy()
        out = forward(m, x)
        np.testing.assert_allclose(x, f(x0))  # the input itself holds the output
        np.testing.assert_allclose(out, f(x0))
        g = np.ones((3, 2))
        backward(m, x, g)
        np.testing.assert_allclose(x, x0, rtol=1e-15)


def test_add_constant_vector(rng):
    c = np.array([1.0, -2, 0.5])
    m = call("function(c) return nn.AddConstant(c) end", lua_tensor(c))
    x = rng.standard_normal((4, 3))
    np.testing.assert_allclose(forward(m, x), x + c)
    np.testing.assert_allclose(forward(m, x[1].copy()), x[1] + c)
    mi = call("function(c) return nn.AddConstant(c, true) end", lua_tensor(c))
    x2 = x.copy()
    np.testing.assert_allclose(forward(mi, x2), x + c)
    backward(mi, x2, np.ones((4, 3)))
    np.testing.assert_allclose(x2, x, rtol=1e-15)  # restored
    with pytest.raises(luabridge.LuaError, match=r"input is not scalar or doesn't match with the dimension of constant"):
        forward(m, np.zeros((3, 4)))


def test_gradient_reversal_and_l1_penalty(rng):
    x = rng.standard_normal((3, 4))
    g = rng.standard_normal((3, 4))
    np.testing.assert_allclose(backward(module("nn.GradientReversal(2)"), x, g), -2 * g)
    m = module("nn.L1Penalty(0.3)")
    np.testing.assert_array_equal(forward(m, x), x)
    assert m.loss == pytest.approx(0.3 * np.abs(x).sum())
    np.testing.assert_allclose(backward(m, x, g), g + 0.3 * np.sign(x))
    m = module("nn.L1Penalty(0.3, true, false)")
    forward(m, x)
    assert m.loss == pytest.approx(0.3 * np.abs(x).mean())
    np.testing.assert_allclose(backward(m, x, g), 0.3 / x.size * np.sign(x))


def test_copy_types(rng):
    m = module("nn.Copy('torch.DoubleTensor', 'torch.FloatTensor')")
    x = rng.standard_normal((2, 3))
    out = call("function(m, x) return m:forward(x) end", m, lua_tensor(x))
    assert luabridge.eval("torch.type")(out) == "torch.FloatTensor"
    np.testing.assert_allclose(luabridge.to_numpy(out), x.astype(np.float32))
    gi = call("function(m, x) return m:backward(x, torch.FloatTensor(2, 3):fill(1)) end", m, lua_tensor(x))
    assert luabridge.eval("torch.type")(gi) == "torch.DoubleTensor"


def test_constant_and_one_hot(rng):
    m = module("nn.Constant(torch.Tensor{{1, 2}, {3, 4}}, 1)")
    x = rng.standard_normal((5, 3))
    np.testing.assert_array_equal(forward(m, x), np.broadcast_to([[1, 2], [3, 4]], (5, 2, 2)))
    np.testing.assert_array_equal(forward(m, x[0].copy()), [[1, 2], [3, 4]])
    np.testing.assert_array_equal(backward(m, x, np.ones((5, 2, 2))), np.zeros((5, 3)))
    np.testing.assert_array_equal(forward(module("nn.Constant(2.5)"), x), [2.5])
    oh = module("nn.OneHot(4)")
    idx = np.array([[1.0, 4], [2, 2], [3, 1]])
    np.testing.assert_array_equal(forward(oh, idx), np.eye(4)[idx.astype(int) - 1])
    np.testing.assert_array_equal(forward(oh, np.array([2.0])), [[0, 1, 0, 0]])
    with pytest.raises(luabridge.LuaError, match=r"nn.OneHot: indices must be in \[1, 4\]"):
        forward(oh, np.array([5.0]))


def test_rrelu(rng):
    m = module("nn.RReLU(0.1, 0.3)")
    x = rng.standard_normal((50, 40))
    out = forward(m, x)
    pos = x > 0
    np.testing.assert_array_equal(out[pos], x[pos])
    slopes = out[~pos] / x[~pos]
    assert slopes.min() >= 0.1 and slopes.max() <= 0.3 and slopes.std() > 0.03
    g = rng.standard_normal(x.shape)
    np.testing.assert_allclose(backward(m, x, g), g * np.where(pos, 1, out / np.where(pos, 1, x)), rtol=1e-12)
    call("function(m) m:evaluate() end", m)
    np.testing.assert_allclose(forward(m, x), np.where(pos, x, 0.2 * x), rtol=1e-12)
    np.testing.assert_allclose(backward(m, x, g), np.where(pos, g, 0.2 * g), rtol=1e-12)
    mi = module("nn.RReLU(0.1, 0.3, true)")
    x2 = x.copy()
    out2 = forward(mi, x2)
    np.testing.assert_array_equal(x2, out2)


def test_spatial_and_volumetric_dropout(rng):
    m = module("nn.SpatialDropout(0.5)")
    x = rng.uniform(1, 2, (4, 30, 3, 2))
    out = forward(m, x)
    kept = out[:, :, 0, 0] != 0
    assert 0.3 < kept.mean() < 0.7
    np.testing.assert_array_equal(out, x * kept[:, :, None, None])  # whole planes, no rescaling
    g = rng.standard_normal(x.shape)
    np.testing.assert_array_equal(backward(m, x, g), g * kept[:, :, None, None])
    call("function(m) m:evaluate() end", m)
    np.testing.assert_allclose(forward(m, x), 0.5 * x)
    with pytest.raises(luabridge.LuaError, match="backprop only defined while training"):
        backward(m, x, g)
    v = module("nn.VolumetricDropout(0.5)")
    x = rng.uniform(1, 2, (20, 2, 2, 3))
    out = forward(v, x)
    kept = out[:, 0, 0, 0] != 0
    np.testing.assert_array_equal(out, x * kept[:, None, None, None])
    with pytest.raises(luabridge.LuaError, match=r"nn.VolumetricDropout: expected a 4D or 5D input, got 2x3"):
        forward(v, np.zeros((2, 3)))


def test_lookup_table(rng):
    m = module("nn.LookupTable(6, 3)")
    w = field(m, "weight")
    assert abs(w.std() - 1) < 0.8  # normal(0, 1) init
    idx = np.array([[1.0, 3, 3], [6, 1, 2]])
    np.testing.assert_array_equal(forward(m, idx), w[idx.astype(int) - 1])
    np.testing.assert_array_equal(forward(m, idx[0].copy()), w[[0, 2, 2]])
    g = rng.standard_normal((2, 3, 3))
    call("function(m) m:zeroGradParameters() end", m)
    call("function(m, x, g) m:backward(x, g, 0.5) end", m, lua_tensor(idx), lua_tensor(g))
    want = np.zeros((6, 3))
    np.add.at(want, idx.astype(int).ravel() - 1, 0.5 * g.reshape(-1, 3))
    np.testing.assert_allclose(field(m, "gradWeight"), want)


def test_lookup_table_padding_freq_and_max_norm(rng):
    m = module("nn.LookupTable(5, 2, 3)")
    idx = np.array([3.0, 1, 3, 1, 1])
    g = rng.standard_normal((5, 2))
    call("function(m) m:zeroGradParameters(); m:scaleGradByFreq() end", m)
    call("function(m, x, g) m:forward(x); m:backward(x, g) end", m, lua_tensor(idx), lua_tensor(g))
    want = np.zeros((5, 2))
    want[0] = g[[1, 3, 4]].sum(0) / 3  # index 3 is padding: no gradient
    np.testing.assert_allclose(field(m, "gradWeight"), want)
    m = module("nn.LookupTable(4, 3, 0, 1.0)")
    w = field(m, "weight")
    w[:] = [[3.0, 4, 0], [0.1, 0.2, 0.2], [1, 1, 1], [0, 0, 5]]
    out = forward(m, np.array([1.0, 2, 1]))
    np.testing.assert_allclose(w[0], [0.6, 0.8, 0], rtol=1e-6)   # renormalized in place
    np.testing.assert_allclose(w[1], [0.1, 0.2, 0.2])            # already within maxNorm
    np.testing.assert_allclose(w[3], [0, 0, 5])                  # not looked up: unchanged
    np.testing.assert_allclose(out, w[[0, 1, 0]])
    with pytest.raises(luabridge.LuaError, match=r"nn.LookupTable: indices must be in \[1, 4\], got values in \[0, 2\]"):
        forward(m, np.array([0.0, 2]))


def _bn_ref(x, w, b, eps=1e-5):
    axes = (0,) + tuple(range(2, x.ndim))
    mean = x.mean(axes, keepdims=True)
    var = x.var(axes, keepdims=True)
    shape = [1, -1] + [1] * (x.ndim - 2)
    return (x - mean) / np.sqrt(var + eps) * w.reshape(shape) + b.reshape(shape)


def test_batch_normalization(rng):
    m = module("nn.BatchNormalization(3, 1e-5, 0.2)")
    w, b = field(m, "weight"), field(m, "bias")
    b[:] = rng.standard_normal(3)
    x = rng.standard_normal((6, 3)) * 2 + 1
    np.testing.assert_allclose(forward(m, x), _bn_ref(x, w, b), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(field(m, "running_mean"), 0.2 * x.mean(0), rtol=1e-12)
    np.testing.assert_allclose(field(m, "running_var"), 0.8 + 0.2 * x.var(0, ddof=1), rtol=1e-12)
    check_gradients(m, x, ("weight", "bias"), rng)
    call("function(m) m:evaluate() end", m)
    rm, rv = field(m, "running_mean").copy(), field(m, "running_var").copy()
    want = (x - rm) / np.sqrt(rv + 1e-5) * w + b
    np.testing.assert_allclose(forward(m, x), want, rtol=1e-10)
    np.testing.assert_allclose(forward(m, x[0].copy()), want[0], rtol=1e-10)
    check_gradients(m, x, ("weight", "bias"), rng)


def test_batch_normalization_no_affine_and_errors(rng):
    m = module("nn.BatchNormalization(4, 1e-3, 0.1, false)")
    assert m.weight is None
    x = rng.standard_normal((5, 4))
    np.testing.assert_allclose(forward(m, x), _bn_ref(x, np.ones(4), np.zeros(4), 1e-3), rtol=1e-9)
    with pytest.raises(luabridge.LuaError, match=r"only mini-batch supported \(2D tensor\), got 1D tensor instead"):
        forward(m, np.zeros(4))
    with pytest.raises(luabridge.LuaError, match="got 3-feature tensor, expected 4"):
        forward(m, np.zeros((2, 3)))


def test_mm(rng):
    for ta, tb in [(False, False), (True, False), (False, True), (True, True)]:
        m = module(f"nn.MM({str(ta).lower()}, {str(tb).lower()})")
        a0, b0 = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))
        a, b = (a0.T.copy() if ta else a0), (b0.T.copy() if tb else b0)
        np.testing.assert_allclose(forward(m, pair(a, b)), a0 @ b0, rtol=1e-12)
        check_pair_gradients(m, a, b, (), rng)
        ab, bb = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 4, 5))
        a = ab.transpose(0, 2, 1).copy() if ta else ab
        b = bb.transpose(0, 2, 1).copy() if tb else bb
        np.testing.assert_allclose(forward(m, pair(a, b)), ab @ bb, rtol=1e-12)
        check_pair_gradients(m, a, b, (), rng)
    with pytest.raises(luabridge.LuaError, match=r"nn.MM: sizes do not match for a product: 3x4 and 3x2"):
        forward(module("nn.MM()"), pair(np.zeros((3, 4)), np.zeros((3, 2))))


def test_mv(rng):
    for trans in (False, True):
        m = module(f"nn.MV({str(trans).lower()})")
        mat, v = rng.standard_normal((3, 4)), rng.standard_normal(3 if trans else 4)
        want = (mat.T if trans else mat) @ v
        np.testing.assert_allclose(forward(m, pair(mat, v)), want, rtol=1e-12)
        check_pair_gradients(m, mat, v, (), rng)
        mb, vb = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 3 if trans else 4))
        want = np.einsum("bij,bi->bj" if trans else "bij,bj->bi", mb, vb)
        np.testing.assert_allclose(forward(m, pair(mb, vb)), want, rtol=1e-12)
        check_pair_gradients(m, mb, vb, (), rng)
    with pytest.raises(luabridge.LuaError, match=r"nn.MV: expected a matrix and a vector"):
        forward(module("nn.MV()"), pair(np.zeros((3, 4)), np.zeros((3, 4))))


def test_bilinear(rng):
    m = module("nn.Bilinear(3, 4, 2)")
    x1, x2 = rng.standard_normal((5, 3)), rng.standard_normal((5, 4))
    w, b = field(m, "weight"), field(m, "bias")
    np.testing.assert_allclose(forward(m, pair(x1, x2)), np.einsum("bi,kij,bj->bk", x1, w, x2) + b, rtol=1e-12)
    check_pair_gradients(m, x1, x2, ("weight", "bias"), rng)
    m2 = module("nn.Bilinear(3, 4, 2, false)")
    assert m2.bias is None
    check_pair_gradients(m2, x1, x2, ("weight",), rng)
    with pytest.raises(luabridge.LuaError, match=r"expected inputs batch x 3 and batch x 4, got 5x4 and 5x4"):
        forward(m, pair(x2, x2))


def test_index(rng):
    m = module("nn.Index(1)")
    t = rng.standard_normal((4, 3))
    idx = np.array([2, 4, 2], dtype=np.int64)
    np.testing.assert_array_equal(forward(m, pair(t, idx)), t[[1, 3, 1]])
    g = rng.standard_normal((3, 3))
    grads = call("function(m, x, g) return m:backward(x, g) end", m, pair(t, idx), lua_tensor(g))
    want = np.zeros((4, 3))
    np.add.at(want, [1, 3, 1], g)
    np.testing.assert_allclose(luabridge.to_numpy(grads[1]), want)
    np.testing.assert_array_equal(luabridge.to_numpy(grads[2]), np.zeros(3))


@pytest.mark.parametrize("ctor,x,pattern", [
    ("nn.Narrow(2, 3, 4)", np.zeros((2, 5)), r"nn.Narrow: offset 3 and length 4 out of range of dimension 2 \(size 5\)"),
    ("nn.Select(1, 4)", np.zeros((3, 2)), r"nn.Select: index 4 out of range of dimension 1 \(size 3\)"),
    ("nn.Sum(3)", np.zeros((3, 2)), r"nn.Sum: dimension 3 out of range of 3x2 input"),
    ("nn.Max(3)", np.zeros((3, 2)), r"nn.Max: dimension 3 out of range of 3x2 input"),
    ("nn.CMul(3)", np.zeros((2, 4)), r"nn.CMul: input size 2x4 does not match parameter size 3"),
    ("nn.CAdd(2, 3)", np.zeros((3, 3)), r"nn.CAdd: input size 3x3 does not match parameter size 2x3"),
    ("nn.Add(3)", np.zeros((2, 4)), r"nn.Add: input size 2x4 does not match bias size 3"),
    ("nn.PReLU(3)", np.zeros((2, 4)), r"nn.PReLU: wrong number of input planes: expected 3, got input 2x4"),
    ("nn.GatedLinearUnit()", np.zeros((2, 3)), r"halving dimension 2 of 2x3 input must exist and be even"),
    ("nn.Normalize(2)", np.zeros((2, 2, 2)), r"nn.Normalize: expected a vector or a matrix, got 2x2x2"),
    ("nn.Euclidean(3, 2)", np.zeros((2, 4)), r"nn.Euclidean: expected a vector of 3 or a batch of them, got 2x4"),
    ("nn.Cosine(3, 2)", np.zeros(2), r"nn.Cosine: expected a vector of 3 or a batch of them, got 2"),
    ("nn.Padding(3, 1)", np.zeros((2, 2)), r"nn.Padding: dimension 3 out of range of 2x2 input"),
    ("nn.Unsqueeze(4)", np.zeros((2, 2)), r"nn.Unsqueeze: invalid position 4 for 2x2 input"),
    ("nn.CReLU(2)", np.zeros(3), r"nn.CReLU: expected a 2D input or a batch of them, got 3"),
    ("nn.SpatialDropout()", np.zeros((2, 3)), r"nn.SpatialDropout: expected a 3D or 4D input, got 2x3"),
])
def test_bad_sizes(ctor, x, pattern):
    with pytest.raises(luabridge.LuaError, match=pattern):
        forward(module(ctor), x)


@pytest.mark.parametrize("ctor,x,g,pattern", [
    ("nn.Sum(1)", np.zeros((3, 2)), np.zeros(3), r"gradOutput size 3 does not match input size 3x2 summed over dimension 1"),
    ("nn.Padding(1, 2)", np.zeros((3, 2)), np.zeros((3, 2)), r"nn.Padding: gradOutput size 3x2 does not match output size 5x2"),
    ("nn.Euclidean(2, 3)", np.zeros((4, 2)), np.zeros((4, 2)), r"nn.Euclidean: gradOutput size 4x2 does not match output size 4x3"),
    ("nn.BatchNormalization(2)", np.ones((4, 2)), np.zeros((2, 4)), r"gradOutput size 2x4 does not match input size 4x2"),
    ("nn.Max(1)", np.zeros((3, 2)), np.zeros(3), r"nn.Max: inconsistent tensor size"),
])
def test_bad_grad_output_sizes(ctor, x, g, pattern):
    m = module(ctor)
    forward(m, x)
    with pytest.raises(luabridge.LuaError, match=pattern):
        backward(m, x, g)


FLOAT_CASES = [
    ("nn.Linear(4, 3)", (2, 4)), ("nn.ReLU()", (2, 4)), ("nn.Tanh()", (3,)), ("nn.SoftMax()", (2, 4)),
    ("nn.LogSoftMax()", (2, 4)), ("nn.Max(2)", (2, 4)), ("nn.Min(1)", (2, 4)), ("nn.Normalize(math.huge)", (2, 4)),
    ("nn.CMul(4)", (2, 4)), ("nn.PReLU(4)", (2, 4)), ("nn.BatchNormalization(4)", (3, 4)),
    ("nn.Cosine(4, 2)", (2, 4)), ("nn.Euclidean(4, 2)", (2, 4)), ("nn.View(-1)", (2, 4)),
    ("nn.Padding(2, 1)", (2, 4)), ("nn.ELU()", (2, 4)), ("nn.GatedLinearUnit()", (2, 4)),
]


@pytest.mark.parametrize("ctor,shape", FLOAT_CASES, ids=[c[0] for c in FLOAT_CASES])
def test_float_modules_match_double(ctor, shape, rng):
    """m:clone():float() on a FloatTensor gives the double results to float precision (buffers such
    as LongTensor indices survive the conversion)."""
    m = module(ctor)
    f = call("function(m) local c = m:clone():float(); return c end", m)
    x = rng.standard_normal(shape)
    g = rng.standard_normal(forward(m, x).shape)
    want, want_grad = forward(m, x), backward(m, x, g)
    x32, g32 = x.astype(np.float32), g.astype(np.float32)
    for _ in range(2):  # twice: reused buffers
        np.testing.assert_allclose(forward(f, x32), want, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(backward(f, x32, g32), want_grad, rtol=1e-4, atol=1e-4)


def test_lookup_table_float():
    m = module("nn.LookupTable(5, 2):float()")
    out = forward(m, np.array([1.0, 5.0], dtype=np.float32))
    np.testing.assert_array_equal(out, field(m, "weight")[[0, 4]])


def test_batch_normalization_batch_of_one_uses_running_stats(rng):
    """As torch7: a training batch of one normalizes with (and leaves) the running statistics."""
    m = module("nn.BatchNormalization(3)")
    w, b = field(m, "weight"), field(m, "bias")
    field(m, "running_mean")[:] = [0.5, -1, 2]
    field(m, "running_var")[:] = [2, 0.5, 1]
    x = rng.standard_normal((1, 3))
    want = (x - [0.5, -1, 2]) / np.sqrt(np.array([2, 0.5, 1]) + 1e-5) * w + b
    np.testing.assert_allclose(forward(m, x), want, rtol=1e-12)
    np.testing.assert_array_equal(field(m, "running_mean"), [0.5, -1, 2])
    check_gradients(m, x, ("weight", "bias"), rng)
