"""conv2 conv3 xcorr2 xcorr3 (lua/torch/math/conv.lua) against a numpy float64 reference.

The reference is a direct valid cross-correlation (sum of shifted slices weighted by kernel
elements); convolution flips the kernel, full mode zero-pads the input by kernel size - 1.
"""
import numpy as np
import pytest

from helpers import LAYOUTS, N, T, assert_lua_error, call, draw, layout, method, tol


def xcorr_valid(x: np.ndarray, k: np.ndarray) -> np.ndarray:
    out = np.zeros(tuple(a - b + 1 for a, b in zip(x.shape, k.shape)))
    for idx in np.ndindex(*k.shape):
        out += k[idx] * x[tuple(slice(i, i + o) for i, o in zip(idx, out.shape))]
    return out


def reference(name: str, x: np.ndarray, k: np.ndarray, mode: str) -> np.ndarray:
    x, k = x.astype(np.float64), k.astype(np.float64)
    if name.startswith("conv"):
        k = k[(slice(None, None, -1),) * k.ndim]
    if mode == "F":
        x = np.pad(x, [(s - 1, s - 1) for s in k.shape])
    return xcorr_valid(x, k)


OPS = [("conv2", 2), ("xcorr2", 2), ("conv3", 3), ("xcorr3", 3)]


@pytest.mark.parametrize("name, n", OPS)
@pytest.mark.parametrize("mode", ["V", "F"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int32])
def test_single(rng, name, n, mode, dtype):
    x, k = draw(rng, (7, 9, 6)[:n], dtype), draw(rng, (3, 2, 4)[:n], dtype)
    ref = reference(name, x, k, mode)
    for kind in LAYOUTS:
        got = call(name, T(layout(x, kind)), T(layout(k, kind)), mode)
        assert N(got).dtype == dtype
        np.testing.assert_allclose(N(got), ref, **tol(dtype))


@pytest.mark.parametrize("name, n", OPS)
@pytest.mark.parametrize("mode", ["V", "F"])
def test_planes_and_sums(rng, name, n, mode):
    x = rng.standard_normal((3,) + (6, 5, 7)[:n])
    k = rng.standard_normal((3,) + (2, 3, 2)[:n])
    got = N(call(name, T(x), T(k), mode))
    for p in range(3):
        np.testing.assert_allclose(got[p], reference(name, x[p], k[p], mode), rtol=1e-12, atol=1e-12)
    kk = rng.standard_normal((4, 3) + (2, 3, 2)[:n])
    got = N(call(name, T(layout(x, "strided")), T(kk), mode))
    assert got.shape[0] == 4
    for q in range(4):
        ref = sum(reference(name, x[p], kk[q, p], mode) for p in range(3))
        np.testing.assert_allclose(got[q], ref, rtol=1e-12, atol=1e-12)


def test_default_mode_result_and_method_forms(rng):
    x, k = rng.standard_normal((8, 8)), rng.standard_normal((3, 3))
    ref = reference("conv2", x, k, "V")
    np.testing.assert_allclose(N(call("conv2", T(x), T(k))), ref, rtol=1e-12)
    r = np.zeros(4)
    out = call("conv2", T(r), T(x), T(k), "F")
    np.testing.assert_allclose(N(out), reference("conv2", x, k, "F"), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(N(method("xcorr2", T(x), T(k))), reference("xcorr2", x, k, "V"), rtol=1e-12)
    big = np.full((6, 12), 9.0)
    method("conv2", T(big[:, ::2]), T(x), T(k))   # a result of the right size is written where it lies
    np.testing.assert_allclose(big[:, ::2], ref, rtol=1e-12)
    assert (big[:, 1::2] == 9).all()


def test_conv_is_xcorr_with_flipped_kernel_exactly(rng):
    """torch7's own check: conv2(x, k) == xcorr2(x, flip(k)) with no rounding difference."""
    x, k = rng.random((40, 33)), rng.random((9, 7))
    for mode in "VF":
        a = N(call("conv2", T(x), T(k), mode))
        b = N(call("xcorr2", T(x), T(k[::-1, ::-1].copy()), mode))
        np.testing.assert_array_equal(a, b)
    x3 = rng.random((3, 12, 10))
    k3 = rng.random((3, 4, 5))
    np.testing.assert_array_equal(N(call("conv3", T(x3), T(k3), "F")),
                                  N(call("xcorr3", T(x3), T(k3[::-1, ::-1, ::-1].copy()), "F")))


@pytest.mark.parametrize("code, message", [
    ("torch.conv2(torch.Tensor(3, 3), torch.Tensor(4, 4))", "conv2: input (3x3) is smaller than the kernel (4x4)"),
    ("torch.conv2(torch.Tensor(3, 3), torch.Tensor(2, 2), 'X')", "conv2: type of convolution can be 'V' or 'F', got X"),
    ("torch.conv2(torch.Tensor(3, 3), torch.Tensor(2, 2, 2))", "conv2: expected 2D input and 2D kernel, 3D and 3D, or 3D and 4D; got 2D and 3D"),
    ("torch.xcorr3(torch.Tensor(2, 3, 3, 3), torch.Tensor(3, 2, 2, 2))", "xcorr3: 2 input planes and 3 kernel planes"),
    ("torch.conv3(torch.Tensor(2, 3, 3, 3), torch.Tensor(4, 3, 2, 2, 2))", "conv3: invalid number of input planes, the kernel expects 3 and the input has 2"),
    ("torch.conv2(torch.Tensor(3, 3), torch.FloatTensor(2, 2))", "conv2: expected torch.DoubleTensor, got torch.FloatTensor"),
    ("torch.conv2(torch.Tensor(3, 0), torch.Tensor(2, 2), 'F')", "conv2: empty input"),
    ("torch.conv2(torch.HalfTensor(3, 3), torch.HalfTensor(2, 2))", "conv2: not supported for torch.HalfTensor"),
])
def test_errors(lua, code, message):
    assert_lua_error(code, message)
