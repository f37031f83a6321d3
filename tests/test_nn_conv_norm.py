"""Spatial/VolumetricBatchNormalization against numpy float64 batch statistics (torch7's
rules: biased variance to normalize, unbiased in the running average, running statistics in
evaluation and for a batch of one), finite differences, errors, PyTorch when installed."""
import numpy as np
import pytest

import luabridge
from nn_conv_helpers import F, N, T, backward, call, fd_check, field, forward, lua_fn, module, pytorch

set_field = lua_fn("function(m, k, v) m[k] = v end")


def bn_ref(x, w, b, mean, var, eps):
    shape = (1, -1) + (1,) * (x.ndim - 2)
    out = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps)
    return out * (1 if w is None else w.reshape(shape)) + (0 if b is None else b.reshape(shape))


@pytest.mark.parametrize("cls,shape", [("SpatialBatchNormalization", (4, 3, 5, 6)),
                                       ("VolumetricBatchNormalization", (3, 2, 3, 4, 5))])
def test_training_forward_and_running_stats(lua, rng, cls, shape):
    m = module(f"nn.{cls}({shape[1]}, 1e-3, 0.3)")
    call(m, "reset")
    w, b = view_params(m, rng)
    x = rng.standard_normal(shape) * 3 + 1
    axes = tuple(i for i in range(x.ndim) if i != 1)
    mean, var = x.mean(axis=axes), x.var(axis=axes)
    np.testing.assert_allclose(N(forward(m, T(x))), bn_ref(x, w, b, mean, var, 1e-3), atol=1e-12)
    n = x.size // shape[1]
    np.testing.assert_allclose(N(field(m, "running_mean")), 0.3 * mean, atol=1e-12)
    np.testing.assert_allclose(N(field(m, "running_var")), 0.7 + 0.3 * var * n / (n - 1), atol=1e-12)
    # evaluation: running statistics, a single (non-batch) input accepted
    call(m, "evaluate")
    rm, rv = N(field(m, "running_mean")), N(field(m, "running_var"))
    np.testing.assert_allclose(N(forward(m, T(x))), bn_ref(x, w, b, rm, rv, 1e-3), atol=1e-12)
    np.testing.assert_allclose(N(forward(m, T(x[1]))), bn_ref(x[1:2], w, b, rm, rv, 1e-3)[0], atol=1e-12)
    np.testing.assert_allclose(N(field(m, "running_mean")), rm)   # unchanged


def view_params(m, rng):
    w, b = luabridge.to_numpy(field(m, "weight")), luabridge.to_numpy(field(m, "bias"))
    w[...] = rng.uniform(0.5, 1.5, w.shape)
    b[...] = rng.standard_normal(b.shape)
    return w.copy(), b.copy()


def test_batch_of_one_uses_running_stats(lua, rng):
    m = module("nn.SpatialBatchNormalization(2)")
    w, b = view_params(m, rng)
    x = rng.standard_normal((1, 2, 3, 3))
    np.testing.assert_allclose(N(forward(m, T(x))), bn_ref(x, w, b, np.zeros(2), np.ones(2), 1e-5), atol=1e-12)
    np.testing.assert_array_equal(N(field(m, "running_var")), np.ones(2))


@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("train", [True, False])
def test_gradients(lua, rng, affine, train):
    m = module(f"nn.SpatialBatchNormalization(3, 1e-5, 0.1, {str(affine).lower()})")
    if affine:
        view_params(m, rng)
    if not train:
        set_field(m, "running_mean", T(rng.standard_normal(3)))
        set_field(m, "running_var", T(rng.uniform(0.5, 2, 3)))
        call(m, "evaluate")
    fd_check(m, rng.standard_normal((3, 3, 4, 3)), params=("weight", "bias") if affine else (), rng=rng)
    assert (field(m, "weight") is None) == (not affine)


def test_errors_and_printing(lua):
    m = module("nn.SpatialBatchNormalization(3)")
    with pytest.raises(luabridge.LuaError, match=r"nn.SpatialBatchNormalization: only mini-batch supported \(4D tensor\), got 3D tensor instead \(input of size 3x4x4\)"):
        forward(m, T(np.zeros((3, 4, 4))))
    with pytest.raises(luabridge.LuaError, match=r"nn.SpatialBatchNormalization: got 2-feature tensor, expected 3 \(input of size 2x2x4x4\)"):
        forward(m, T(np.zeros((2, 2, 4, 4))))
    with pytest.raises(luabridge.LuaError, match=r"gradOutput size 2x3x4x3 does not match input size 2x3x4x4"):
        backward(m, T(np.zeros((2, 3, 4, 4))), T(np.zeros((2, 3, 4, 3))))
    with pytest.raises(luabridge.LuaError, match=r"affine must be true or false"):
        module("nn.SpatialBatchNormalization(3, 1e-5, 0.1, 1)")
    assert lua_fn("function(m) return tostring(m) end")(m) == "nn.SpatialBatchNormalization (4D) (3)"


@pytest.mark.skipif(pytorch is None, reason="PyTorch not installed")
def test_against_pytorch(lua, rng):
    m = module("nn.SpatialBatchNormalization(4, 1e-5, 0.2)")
    w, b = view_params(m, rng)
    x = rng.standard_normal((5, 4, 3, 6))
    g = rng.standard_normal(x.shape)
    gin = N(backward(m, T(x), T(g)))
    xt, wt, bt = (pytorch.tensor(a, requires_grad=True) for a in (x, w, b))
    rm, rv = pytorch.zeros(4, dtype=pytorch.float64), pytorch.ones(4, dtype=pytorch.float64)
    y = F.batch_norm(xt, rm, rv, wt, bt, training=True, momentum=0.2, eps=1e-5)
    y.backward(pytorch.tensor(g))
    np.testing.assert_allclose(N(field(m, "output")), y.detach().numpy(), atol=1e-12)
    np.testing.assert_allclose(gin, xt.grad.numpy(), atol=1e-10)
    np.testing.assert_allclose(N(field(m, "gradWeight")), wt.grad.numpy(), atol=1e-10)
    np.testing.assert_allclose(N(field(m, "gradBias")), bt.grad.numpy(), atol=1e-10)
    np.testing.assert_allclose(N(field(m, "running_mean")), rm.numpy(), atol=1e-12)
    np.testing.assert_allclose(N(field(m, "running_var")), rv.numpy(), atol=1e-12)


def local_sums(x, k2):
    """L(x): per image, the sum over planes and the (zero-padded, centred) window of k2 / (sum * planes)."""
    C = x.shape[-3]
    kH, kW = k2.shape
    w = k2 / (k2.sum() * C)
    pad = [(0, 0)] * (x.ndim - 2) + [(kH // 2, kH // 2), (kW // 2, kW // 2)]
    xp = np.pad(x, pad)
    H, W = x.shape[-2:]
    out = np.zeros(x.shape[:-3] + (H, W))
    for i, j in np.ndindex(kH, kW):
        out += w[i, j] * xp[..., i:i + H, j:j + W].sum(axis=-3)
    return out


@pytest.mark.parametrize("kernel", ["torch.Tensor(5, 3):fill(1)", "torch.Tensor({1, 2, 1})", None])
def test_subtractive_and_divisive_normalization(lua, rng, kernel):
    k = {"torch.Tensor(5, 3):fill(1)": np.ones((5, 3)), "torch.Tensor({1, 2, 1})": np.outer([1, 2, 1], [1, 2, 1]),
         None: np.ones((9, 9))}[kernel]
    arg = f", {kernel or 'nil'}"
    x = rng.standard_normal((2, 3, 6, 7))
    coef = local_sums(np.ones(x.shape[1:]), k)
    sub = module(f"nn.SpatialSubtractiveNormalization(3{arg})")
    want = x - (local_sums(x, k) / coef)[:, None]
    np.testing.assert_allclose(N(forward(sub, T(x))), want, atol=1e-12)
    np.testing.assert_allclose(N(forward(sub, T(x[1]))), want[1], atol=1e-12)
    fd_check(sub, x, params=(), rng=rng)
    div = module(f"nn.SpatialDivisiveNormalization(3{arg}, 0.6, 0.5)")
    s = np.sqrt(local_sums(x ** 2, k)) / coef
    d = np.where(s > 0.6, s, 0.5)
    np.testing.assert_allclose(N(forward(div, T(x))), x / d[:, None], atol=1e-12)
    fd_check(div, x, params=(), rng=rng)
    con = module(f"nn.SpatialContrastiveNormalization(3{arg}, 0.6, 0.5)")
    y = want
    s = np.sqrt(local_sums(y ** 2, k)) / coef
    np.testing.assert_allclose(N(forward(con, T(x))), y / np.where(s > 0.6, s, 0.5)[:, None], atol=1e-12)


def test_normalization_kernel_errors(lua):
    with pytest.raises(luabridge.LuaError, match=r"nn.SpatialSubtractiveNormalization: the averaging kernel must have odd sizes, got 4x3"):
        module("nn.SpatialSubtractiveNormalization(2, torch.ones(4, 3))")
    with pytest.raises(luabridge.LuaError, match=r"nn.SpatialDivisiveNormalization: expected input with 2 planes in dimension 1, got 3"):
        forward(module("nn.SpatialDivisiveNormalization(2)"), T(np.ones((3, 5, 5))))
