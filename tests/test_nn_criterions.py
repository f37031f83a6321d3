"""nn criterions: loss values against numpy float64 references, gradInput against central
differences of the loss, sizeAverage / weights / ignoreIndex variants, bad targets and sizes."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import luabridge
from helpers import lua_value as lua, numpy_of
from nn_layers_check import call, module, numeric_grad

_LOSS = "function(c, x, y) return (c:forward(x, y)) end"
_GRAD = "function(c, x, y) return c:backward(x, y) end"
def loss(c: Any, x: Any, y: Any) -> float:
    return float(call(_LOSS, c, x, y))


def grad(c: Any, x: Any, y: Any) -> Any:
    return numpy_of(call(_GRAD, c, x, y))


def check(code: str, x: Any, y: Any, want: float, tol: float = 1e-10, fd: bool = True) -> Any:
    """The criterion `code` gives loss `want` on (x, y), and (fd) a gradInput matching central
    differences (x: a contiguous float64 array or a list of them). Returns the criterion."""
    c = module(code)
    lx, ly = lua(x), lua(y)
    assert loss(c, lx, ly) == pytest.approx(want, rel=tol, abs=tol)
    if fd:
        g = grad(c, lx, ly)
        parts = x if isinstance(x, list) else [x]
        gs = g if isinstance(x, list) else [g]
        for part, gpart in zip(parts, gs):
            np.testing.assert_allclose(gpart, numeric_grad(lambda: loss(c, lx, ly), part),
                                       rtol=1e-5, atol=1e-7)
    return c


def tensor_code(a: np.ndarray) -> str:
    """A Lua expression making a DoubleTensor with a's values and shape."""
    values = ",".join(repr(float(v)) for v in a.reshape(-1))
    return "torch.Tensor({%s}):view(%s)" % (values, ",".join(map(str, a.shape)))


def targets(rng: np.random.Generator, n: int, classes: int) -> np.ndarray:
    return rng.integers(1, classes + 1, n).astype(np.int64)


# ----------------------------------------------------------------------------------------------
# elementwise criterions

def away_from_kinks(rng, shape, y=None, points=(0.0,), gap=0.05):
    """Random inputs with x - y kept `gap` away from each non-differentiable point."""
    x = rng.standard_normal(shape) * 1.5
    base = 0 if y is None else y
    for p in points:
        d = x - base - p
        x = np.where(np.abs(d) < gap, x + 2 * gap, x)
    return x


@pytest.mark.parametrize("avg", [True, False])
def test_mse_abs_smoothl1(rng, avg):
    y = rng.standard_normal((3, 5))
    x = away_from_kinks(rng, (3, 5), y, (-1.0, 0.0, 1.0))
    n = x.size if avg else 1
    z = x - y
    flag = "true" if avg else "false"
    check(f"nn.MSECriterion({flag})", x, y, (z ** 2).sum() / n)
    check(f"nn.AbsCriterion({flag})", x, y, np.abs(z).sum() / n)
    huber = np.where(np.abs(z) < 1, 0.5 * z ** 2, np.abs(z) - 0.5)
    check(f"nn.SmoothL1Criterion({flag})", x, y, huber.sum() / n)


def test_pointwise_layouts_types_and_flat_targets(rng):
    """Non-contiguous inputs, a target of another shape with as many elements, float32."""
    big = rng.standard_normal((8, 6))
    x = big[::2, 1:5]                       # strided 4x4 view
    y = rng.standard_normal(16)
    ref = ((x.reshape(-1) - y) ** 2).mean()
    c = module("nn.MSECriterion()")
    assert loss(c, lua(x), lua(y)) == pytest.approx(ref, rel=1e-12)
    g = grad(c, lua(x), lua(y))
    assert g.shape == (4, 4)
    np.testing.assert_allclose(g, 2 * (x - y.reshape(4, 4)) / 16, rtol=1e-12)
    xf, yf = x.astype(np.float32), y.astype(np.float32)
    cf = module("nn.MSECriterion():float()")
    assert loss(cf, lua(xf), lua(yf)) == pytest.approx(ref, rel=1e-5)
    assert grad(cf, lua(xf), lua(yf)).dtype == np.float32
    # a target of another type is converted
    assert loss(cf, lua(xf), lua(y)) == pytest.approx(ref, rel=1e-5)
    mt = module("nn.MSECriterion()")
    assert loss(mt, lua(x.T), lua(np.ascontiguousarray(x.T) + 1)) == pytest.approx(1.0)


def test_distkldiv(rng):
    x = np.log(rng.uniform(0.1, 1, (2, 5)))
    y = rng.uniform(0, 1, (2, 5))
    y[0, 1] = 0
    ref = np.where(y > 0, y * (np.log(np.where(y > 0, y, 1)) - x), 0)
    check("nn.DistKLDivCriterion()", x, y, ref.sum() / x.size)
    c = check("nn.DistKLDivCriterion()", x[0].copy(), y[0].copy(), ref[0].sum() / 5)
    c.sizeAverage = False
    assert loss(c, lua(x), lua(y)) == pytest.approx(ref.sum())


@pytest.mark.parametrize("margin", [1.0, 0.3])
def test_margin_and_soft_margin(rng, margin):
    y = rng.choice([-1.0, 1.0], 12)
    x = rng.standard_normal(12)
    x = np.where(np.abs(x * y - margin) < 0.05, x + 0.2 * y, x)
    check(f"nn.MarginCriterion({margin})", x, y, np.maximum(0, margin - x * y).mean())
    check("nn.SoftMarginCriterion()", x, y, np.log1p(np.exp(-x * y)).mean())


def bce_ref(x, y, w=1.0):
    eps = 1e-12
    return -((np.log(x + eps) * y + np.log(1 - x + eps) * (1 - y)) * w).sum()


def test_bce(rng):
    x = rng.uniform(0.05, 0.95, (4, 3))
    y = rng.uniform(0, 1, (4, 3))
    check("nn.BCECriterion()", x, y, bce_ref(x, y) / 12)
    w = rng.uniform(0.5, 2, 3)
    c = check(f"nn.BCECriterion({tensor_code(w)})", x, y,
              bce_ref(x, y, w) / 12)
    assert luabridge.eval("function(c) return c:__len() end")(c) == 3
    check(f"nn.BCECriterion({tensor_code(w)}, false)", x[1].copy(),
          y[1].copy(), bce_ref(x[1], y[1], w))
    # 0 and 1 stay finite
    edge = np.array([0.0, 1.0, 0.5])
    assert np.isfinite(loss(module("nn.BCECriterion()"), lua(edge), lua(np.array([1.0, 0.0, 1.0]))))


def test_bce_errors(lua_rt=None):
    c = module("nn.BCECriterion()")
    with pytest.raises(luabridge.LuaError, match=r"BCECriterion: input values should be between 0 and 1"):
        loss(c, lua(np.array([0.5, 1.5])), lua(np.array([1.0, 0.0])))
    cw = module("nn.BCECriterion(torch.ones(4))")
    with pytest.raises(luabridge.LuaError, match=r"weights of size 4 do not match target of size 2x3"):
        loss(cw, lua(np.full((2, 3), 0.5)), lua(np.ones((2, 3))))


def test_multilabel_soft_margin(rng):
    x = rng.standard_normal((3, 4)) * 3
    y = rng.integers(0, 2, (3, 4)).astype(np.float64)
    p = 1 / (1 + np.exp(-x))
    ref = -(y * np.log(p) + (1 - y) * np.log(1 - p))
    check("nn.MultiLabelSoftMarginCriterion()", x, y, ref.sum() / 12)
    w = rng.uniform(0.5, 2, 4)
    code = f"nn.MultiLabelSoftMarginCriterion({tensor_code(w)}, false)"
    check(code, x, y, (ref * w).sum())
    check(code, x[0].copy(), y[0].copy(), (ref[0] * w).sum())
    # large scores stay exact (stable form)
    big = np.array([60.0, -60.0])
    assert loss(module("nn.MultiLabelSoftMarginCriterion()"), lua(big), lua(np.array([0.0, 1.0]))) \
        == pytest.approx(60.0)


def test_size_mismatch_errors():
    for name in ["MSECriterion", "AbsCriterion", "SmoothL1Criterion", "MarginCriterion",
                 "SoftMarginCriterion"]:
        c = module(f"nn.{name}()")
        with pytest.raises(luabridge.LuaError,
                           match=rf"nn.{name}: input and target size mismatch, 2x3 \(6 elements\) and 5 \(5 elements\)"):
            loss(c, lua(np.zeros((2, 3))), lua(np.zeros(5)))
        with pytest.raises(luabridge.LuaError, match=rf"nn.{name}: target must be a tensor, got number"):
            loss(c, lua(np.zeros(3)), 1)
    with pytest.raises(luabridge.LuaError, match=r"DistKLDivCriterion: input and target should have the same size"):
        loss(module("nn.DistKLDivCriterion()"), lua(np.zeros((2, 3))), lua(np.zeros(6)))


# ----------------------------------------------------------------------------------------------
# classification criterions

def nll_ref(x, t, w=None, avg=True, ignore=-100):
    x = np.atleast_2d(x)
    t = np.atleast_1d(t)
    w = np.ones(x.shape[1]) if w is None else w
    keep = t != ignore
    ws = w[t[keep] - 1]
    total = -(x[keep, t[keep] - 1] * ws).sum()
    return total / ws.sum() if avg and ws.sum() != 0 else total


@pytest.mark.parametrize("avg", [True, False])
def test_class_nll(rng, avg):
    x = rng.standard_normal((5, 4))
    t = targets(rng, 5, 4)
    flag = "true" if avg else "false"
    check(f"nn.ClassNLLCriterion(nil, {flag})", x, t, nll_ref(x, t, avg=avg))
    w = rng.uniform(0.2, 2, 4)
    wcode = tensor_code(w)
    check(f"nn.ClassNLLCriterion({wcode}, {flag})", x, t, nll_ref(x, t, w, avg))
    # single sample: a number, a 1-element tensor; float targets and other index types
    check(f"nn.ClassNLLCriterion({wcode}, {flag})", x[0].copy(), 3, nll_ref(x[0], np.array([3]), w, avg))
    check(f"nn.ClassNLLCriterion(nil, {flag})", x[1].copy(), np.array([2]), -x[1, 1])
    check(f"nn.ClassNLLCriterion({wcode}, {flag})", x, t.astype(np.float64), nll_ref(x, t, w, avg))
    check(f"nn.ClassNLLCriterion({wcode}, {flag})", x, t.astype(np.int32), nll_ref(x, t, w, avg))


def test_class_nll_total_weight_and_layouts(rng):
    x = rng.standard_normal((4, 6)).T          # 6x4, non-contiguous
    t = targets(rng, 6, 4)
    w = rng.uniform(0.2, 2, 4)
    c = module(f"nn.ClassNLLCriterion({tensor_code(w)})")
    out, total = call("function(c, x, y) return c:forward(x, y) end", c, lua(x), lua(t))
    assert out == pytest.approx(nll_ref(x, t, w))
    assert total == pytest.approx(w[t - 1].sum())
    g = grad(c, lua(x), lua(t))
    want = np.zeros((6, 4))
    want[np.arange(6), t - 1] = -w[t - 1] / w[t - 1].sum()
    np.testing.assert_allclose(g, want, rtol=1e-12)
    assert luabridge.eval("function(c) return c:__len() end")(c) == 4


def test_class_nll_ignore_index(rng):
    x = rng.standard_normal((5, 4))
    t = targets(rng, 5, 4)
    t[[0, 3]] = -1
    c = check("nn.ClassNLLCriterion(nil, nil, -1)", x, t, nll_ref(x, t, ignore=-1))
    g = grad(c, lua(x), lua(t))
    assert not g[[0, 3]].any()
    # default ignoreIndex is -100; all ignored gives 0 and no gradient
    c2 = module("nn.ClassNLLCriterion(nil, true, 2)")
    assert loss(c2, lua(x[0].copy()), 2) == 0
    assert not grad(c2, lua(x[0].copy()), 2).any()
    check("nn.ClassNLLCriterion()", x, np.full(5, -100), 0.0)


def test_class_nll_errors(rng):
    c = module("nn.ClassNLLCriterion()")
    x = rng.standard_normal((3, 4))
    cases = [
        (x, np.array([1, 5, 2]), r"ClassNLLCriterion: target 5 out of range, expected a class index in \[1, 4\]"),
        (x, np.array([1, 0, 2]), r"target 0 out of range"),
        (x, np.array([1, 2]), r"target size 2 does not match input size 3x4 \(3 samples\)"),
        (x, np.ones((3, 2), np.int64), r"multi-target not supported"),
        (np.zeros((2, 3, 4)), np.array([1, 2]), r"input must be 1-D or 2-D, got 2x3x4"),
        (x, np.array([1.5, 2, 2]), r"target 1.5 out of range"),
    ]
    for xi, ti, pattern in cases:
        with pytest.raises(luabridge.LuaError, match=pattern):
            loss(c, lua(xi), lua(ti))
    with pytest.raises(luabridge.LuaError, match=r"weights should be defined for all 4 classes or none"):
        loss(module("nn.ClassNLLCriterion(torch.ones(3))"), lua(x), lua(np.array([1, 2, 3])))
    with pytest.raises(luabridge.LuaError, match=r"weights must be a 1-D tensor"):
        module("nn.ClassNLLCriterion(torch.ones(2, 2))")


def test_class_nll_one_sample_reads_the_first_target(rng):
    """A 1-D input is one sample: torch7 read the target's first element whatever its size (rnn's
    FastLSTM_issue203 test feeds {1, 3})."""
    c = module("nn.ClassNLLCriterion()")
    x = rng.standard_normal(4)
    assert loss(c, lua(x), lua(np.array([3, 1], np.int32))) == pytest.approx(-x[2])
    g = grad(c, lua(x), lua(np.array([2, 4])))
    np.testing.assert_array_equal(g, [0, -1, 0, 0])


def log_softmax(x):
    m = x.max(-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(-1, keepdims=True))


def test_cross_entropy(rng):
    x = rng.standard_normal((4, 5)) * 2
    t = targets(rng, 4, 5)
    check("nn.CrossEntropyCriterion()", x, t, nll_ref(log_softmax(x), t))
    w = rng.uniform(0.2, 2, 5)
    wcode = tensor_code(w)
    check(f"nn.CrossEntropyCriterion({wcode})", x, t, nll_ref(log_softmax(x), t, w))
    check(f"nn.CrossEntropyCriterion({wcode}, false)", x, t, nll_ref(log_softmax(x), t, w, False))
    check("nn.CrossEntropyCriterion()", x[2].copy(), int(t[2]), -log_softmax(x[2])[t[2] - 1])
    # a 1xN input and 1-element target are one sample; gradInput keeps the input's size
    c = check("nn.CrossEntropyCriterion()", x[:1].copy(), t[:1].copy(), -log_softmax(x[0])[t[0] - 1])
    assert grad(c, lua(x[:1].copy()), lua(t[:1].copy())).shape == (1, 5)
    # changing sizeAverage after construction reaches the inner ClassNLLCriterion
    c = module("nn.CrossEntropyCriterion()")
    c.sizeAverage = False
    assert loss(c, lua(x), lua(t)) == pytest.approx(nll_ref(log_softmax(x), t, avg=False))


def test_spatial_class_nll(rng):
    x = rng.standard_normal((2, 3, 4, 5))
    t = rng.integers(1, 4, (2, 4, 5))
    flat_x = x.transpose(0, 2, 3, 1).reshape(-1, 3)
    check("nn.SpatialClassNLLCriterion()", x, t, nll_ref(flat_x, t.reshape(-1)))
    w = rng.uniform(0.2, 2, 3)
    wcode = tensor_code(w)
    check(f"nn.SpatialClassNLLCriterion({wcode}, false)", x, t, nll_ref(flat_x, t.reshape(-1), w, False))
    c = module("nn.SpatialClassNLLCriterion()")
    with pytest.raises(luabridge.LuaError, match=r"size mismatch, input 2x3x4x5 and target 2x4x4"):
        loss(c, lua(x), lua(t[:, :, :4].copy()))
    with pytest.raises(luabridge.LuaError, match=r"expected a 4-D input"):
        loss(c, lua(x[0].copy()), lua(t[0].copy()))
    bad = t.copy()
    bad[1, 2, 3] = 4
    with pytest.raises(luabridge.LuaError, match=r"target out of range, expected class indices in \[1, 3\]"):
        loss(c, lua(x), lua(bad))


def multi_margin_ref(x, t, p=1, w=None, margin=1.0, avg=True):
    x = np.atleast_2d(x)
    t = np.atleast_1d(t) - 1
    total = 0.0
    for i, c in enumerate(t):
        z = np.maximum(0, margin - x[i, c] + x[i])
        z[c] = 0
        total += (z ** p).sum() * (1 if w is None else w[c])
    total /= x.shape[1]
    return total / x.shape[0] if avg else total


@pytest.mark.parametrize("p", [1, 2])
def test_multi_margin(rng, p):
    x = rng.standard_normal((4, 5))
    t = targets(rng, 4, 5)
    check(f"nn.MultiMarginCriterion({p})", x, t, multi_margin_ref(x, t, p))
    w = rng.uniform(0.2, 2, 5)
    wcode = tensor_code(w)
    check(f"nn.MultiMarginCriterion({p}, {wcode}, 0.5)", x, t, multi_margin_ref(x, t, p, w, 0.5))
    check(f"nn.MultiMarginCriterion({p})", x[1].copy(), int(t[1]), multi_margin_ref(x[1], t[1], p))
    c = module(f"nn.MultiMarginCriterion({p})")
    c.sizeAverage = False
    assert loss(c, lua(x), lua(t)) == pytest.approx(multi_margin_ref(x, t, p, avg=False))


def test_multi_margin_errors(rng):
    with pytest.raises(luabridge.LuaError, match=r"only p = 1 and p = 2 are supported, got 3"):
        module("nn.MultiMarginCriterion(3)")
    c = module("nn.MultiMarginCriterion()")
    with pytest.raises(luabridge.LuaError, match=r"inconsistent target size 2 for input of size 3x4"):
        loss(c, lua(np.zeros((3, 4))), lua(np.array([1, 2])))
    with pytest.raises(luabridge.LuaError, match=r"target 9 out of range"):
        loss(c, lua(np.zeros(4)), 9)


def multilabel_margin_ref(x, t, avg=True):
    x, t = np.atleast_2d(x), np.atleast_2d(t)
    total = 0.0
    for row, trow in zip(x, t):
        listed = []
        for c in trow:
            if c == 0:
                break
            listed.append(c - 1)
        others = [d for d in range(len(row)) if d not in listed]
        for j in listed:
            total += np.maximum(0, 1 - row[j] + row[others]).sum()
    total /= x.shape[1]
    return total / x.shape[0] if avg else total


def test_multilabel_margin(rng):
    x = rng.standard_normal((3, 5)) * 0.5
    t = np.array([[3, 1, 0, 2, 2], [5, 4, 3, 2, 1], [2, 0, 0, 0, 0]])
    c = check("nn.MultiLabelMarginCriterion()", x, t, multilabel_margin_ref(x, t))
    is_target = numpy_of(c.isTarget)
    np.testing.assert_array_equal(is_target, [[1, 0, 1, 0, 0], [1, 1, 1, 1, 1], [0, 1, 0, 0, 0]])
    check("nn.MultiLabelMarginCriterion()", x[0].copy(), t[0].copy(), multilabel_margin_ref(x[0], t[0]))
    with pytest.raises(luabridge.LuaError, match=r"target out of range, expected class indices in \[1, 5\] or 0, got values in \[0, 6\]"):
        loss(c, lua(x), lua(np.where(t == 5, 6, t)))
    with pytest.raises(luabridge.LuaError, match=r"inconsistent target size 3x4 for input of size 3x5"):
        loss(c, lua(x), lua(t[:, :4].copy()))


# ----------------------------------------------------------------------------------------------
# embedding and ranking criterions

def test_hinge_embedding(rng):
    x = rng.uniform(0, 2, 8)
    y = rng.choice([-1.0, 1.0], 8)
    x = np.where(np.abs(x - 1.2) < 0.05, x + 0.1, x)
    ref = np.where(y == 1, x, np.maximum(0, 1.2 - x))
    check("nn.HingeEmbeddingCriterion(1.2)", x, y, ref.mean())
    c = check("nn.HingeEmbeddingCriterion()", x[:1].copy(), -1, max(0, 1 - x[0]))
    c.sizeAverage = False
    assert loss(c, lua(x), lua(y)) == pytest.approx(np.where(y == 1, x, np.maximum(0, 1 - x)).sum())


@pytest.mark.parametrize("y", [1, -1])
def test_l1_hinge_embedding(rng, y):
    a, b = rng.standard_normal(5), rng.standard_normal(5)
    d = np.abs(a - b).sum()
    margin = d + 1 if y == -1 else 1
    check(f"nn.L1HingeEmbeddingCriterion({margin})", [a, b], y, d if y == 1 else margin - d)
    c = module("nn.L1HingeEmbeddingCriterion(0.5)")
    assert loss(c, lua([a, b]), -1) == pytest.approx(max(0, 0.5 - d))
    with pytest.raises(luabridge.LuaError, match=r"label must be 1 or -1, got 0"):
        loss(c, lua([a, b]), 0)


def cosine(a, b):
    a, b = np.atleast_2d(a), np.atleast_2d(b)
    return (a * b).sum(1) / np.sqrt(((a * a).sum(1) + 1e-12) * ((b * b).sum(1) + 1e-12))


def test_cosine_embedding(rng):
    a, b = rng.standard_normal((6, 4)), rng.standard_normal((6, 4))
    y = np.array([1.0, -1, 1, -1, -1, 1])
    margin = 0.1
    cs = cosine(a, b)
    ref = np.where(y == 1, 1 - cs, np.maximum(0, cs - margin))
    check(f"nn.CosineEmbeddingCriterion({margin})", [a, b], y, ref.mean())
    c = check("nn.CosineEmbeddingCriterion()", [a[0].copy(), b[0].copy()], 1, 1 - cs[0])
    g = grad(c, lua([a[0].copy(), b[0].copy()]), 1)
    assert g[0].shape == (4,) and g[1].shape == (4,)
    c.sizeAverage = False
    assert loss(c, lua([a, b]), lua(y)) == pytest.approx(np.where(y == 1, 1 - cs, np.maximum(0, cs)).sum())
    with pytest.raises(luabridge.LuaError, match=r"labels must be 1 or -1, got values in \[2, 2\]"):
        loss(c, lua([a, b]), lua(np.full(6, 2.0)))
    with pytest.raises(luabridge.LuaError, match=r"5 labels for 6 pairs"):
        loss(c, lua([a, b]), lua(np.ones(5)))


def test_margin_ranking(rng):
    a, b = rng.standard_normal(7), rng.standard_normal(7)
    y = rng.choice([-1.0, 1.0], 7)
    margin = 0.3
    d = -y * (a - b) + margin
    a = np.where(np.abs(d) < 0.05, a + 0.2, a)
    ref = np.maximum(0, -y * (a - b) + margin)
    check(f"nn.MarginRankingCriterion({margin})", [a, b], y, ref.mean())
    c = module(f"nn.MarginRankingCriterion({margin})")
    c.sizeAverage = False
    assert loss(c, lua([a, b]), lua(y)) == pytest.approx(ref.sum())
    # one pair with a number label
    c1 = check(f"nn.MarginRankingCriterion({margin})", [a[:1].copy(), b[:1].copy()], -1,
               max(0, (a[0] - b[0]) + margin))
    assert c1.output == pytest.approx(max(0, (a[0] - b[0]) + margin))
    with pytest.raises(luabridge.LuaError, match=r"inconsistent sizes"):
        loss(c, lua([a, b]), lua(y[:3].copy()))


def test_weighted_mse(rng):
    w = rng.uniform(0.5, 2, (3, 2))
    x, y = rng.standard_normal((4, 3, 2)), rng.standard_normal((4, 3, 2))
    wcode = tensor_code(w)
    check(f"nn.WeightedMSECriterion({wcode})", x, y, ((x - w * y) ** 2).mean())
    check(f"nn.WeightedMSECriterion({wcode})", x[0].copy(), y[0].copy(), ((x[0] - w * y[0]) ** 2).mean())
    with pytest.raises(luabridge.LuaError, match=r"weight of size 3x2 does not match target of size 5"):
        loss(module(f"nn.WeightedMSECriterion({wcode})"), lua(np.zeros(5)), lua(np.zeros(5)))


# ----------------------------------------------------------------------------------------------
# combinations

def test_parallel_criterion(rng):
    x1, t1 = rng.standard_normal((3, 4)), targets(rng, 3, 4)
    x2, t2 = rng.standard_normal((3, 2)), rng.standard_normal((3, 2))
    code = "nn.ParallelCriterion():add(nn.ClassNLLCriterion(), 0.5):add(nn.MSECriterion())"
    want = 0.5 * nll_ref(x1, t1) + ((x2 - t2) ** 2).mean()
    check(code, [x1, x2], [t1, t2], want)
    # repeatTarget, nested tables
    x3 = rng.standard_normal((3, 2))
    check("nn.ParallelCriterion(true):add(nn.MSECriterion()):add(nn.AbsCriterion(), 2)", [x2, x3], t2,
          ((x2 - t2) ** 2).mean() + 2 * np.abs(x3 - t2).mean())
    nested = "nn.ParallelCriterion():add(nn.MSECriterion(), 3):add(%s)" % code
    c = module(nested)
    got = loss(c, lua([x3, [x1, x2]]), lua([t2, [t1, t2]]))
    assert got == pytest.approx(3 * ((x3 - t2) ** 2).mean() + want)
    g = grad(c, lua([x3, [x1, x2]]), lua([t2, [t1, t2]]))
    np.testing.assert_allclose(g[0], 3 * 2 * (x3 - t2) / 6, rtol=1e-12)
    np.testing.assert_allclose(g[1][1], 2 * (x2 - t2) / 6, rtol=1e-12)
    with pytest.raises(luabridge.LuaError, match=r"expected a criterion, got number"):
        module("nn.ParallelCriterion():add(3)")


def test_multi_criterion(rng):
    x, t = rng.standard_normal((3, 4)), targets(rng, 3, 4)
    code = "nn.MultiCriterion():add(nn.ClassNLLCriterion(), 0.5):add(nn.CrossEntropyCriterion())"
    check(code, x, t, 0.5 * nll_ref(x, t) + nll_ref(log_softmax(x), t))
    c = module("nn.MultiCriterion():add(nn.MSECriterion()):add(nn.AbsCriterion(), 3):float()")
    xf, yf = x.astype(np.float32), rng.standard_normal((3, 4)).astype(np.float32)
    assert loss(c, lua(xf), lua(yf)) == pytest.approx(((x - yf) ** 2).mean() + 3 * np.abs(x - yf).mean(), rel=1e-5)
    assert grad(c, lua(xf), lua(yf)).dtype == np.float32


def test_empty_inputs():
    c = module("nn.MSECriterion(false)")
    e = np.zeros((0, 3))
    assert loss(c, lua(e), lua(e)) == 0
    assert grad(c, lua(e), lua(e)).shape == (0, 3)
    assert np.isnan(loss(module("nn.AbsCriterion()"), lua(e), lua(e)))   # 0 / 0 as torch7's
    assert loss(module("nn.ClassNLLCriterion()"), lua(e), lua(np.zeros(0, np.int64))) == 0


# ----------------------------------------------------------------------------------------------
# further criterions of torch7's nn

def test_l1_cost(rng):
    x = away_from_kinks(rng, (3, 4))
    check("nn.L1Cost()", x, None, np.abs(x).sum())


def test_module_criterion(rng):
    x, y = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    check("nn.ModuleCriterion(nn.MSECriterion(), nn.Tanh(), nn.MulConstant(2))", x, y,
          ((np.tanh(x) - 2 * y) ** 2).mean())
    with pytest.raises(luabridge.LuaError, match=r"ModuleCriterion: expected a criterion, got nn.Tanh"):
        module("nn.ModuleCriterion(nn.Tanh())")


def test_criterion_table(rng):
    x, y = rng.standard_normal(5), rng.standard_normal(5)
    m = module("nn.CriterionTable(nn.MSECriterion())")
    out = call("function(m, x, y) return m:forward({x, y}) end", m, lua(x), lua(y))
    assert out == pytest.approx(((x - y) ** 2).mean())
    g = call("function(m, x, y) return m:backward({x, y}, 1) end", m, lua(x), lua(y))
    np.testing.assert_allclose(numpy_of(g[1]), 2 * (x - y) / 5, rtol=1e-12)


def test_distance_ratio(rng):
    x, y = rng.uniform(0, 2, (6, 1)), rng.uniform(0, 2, (6, 1))
    ref = x + np.log(np.exp(-x) + np.exp(-y))
    check("nn.DistanceRatioCriterion()", [x, y], None, ref.sum() / 6)
    check("nn.DistanceRatioCriterion(false)", [x, y], None, ref.sum())
    with pytest.raises(luabridge.LuaError, match=r"distances of sizes 6x1 and 5 do not match"):
        loss(module("nn.DistanceRatioCriterion()"), lua([x, np.zeros(5)]), None)


def test_class_simplex(rng):
    n = 5
    c = module(f"nn.ClassSimplexCriterion({n})")
    simplex = numpy_of(c.simplex)
    assert simplex.shape == (n, n) and not simplex[:, n - 1].any()
    gram = simplex @ simplex.T                   # unit vertices, equal angles, centred
    np.testing.assert_allclose(np.diag(gram), 1, atol=1e-12)
    np.testing.assert_allclose(gram[~np.eye(n, dtype=bool)], -1 / (n - 1), atol=1e-12)
    np.testing.assert_allclose(simplex.sum(0), 0, atol=1e-12)
    x, t = rng.standard_normal((3, n)), targets(rng, 3, n)
    check(f"nn.ClassSimplexCriterion({n})", x, t, ((x - simplex[t - 1]) ** 2).mean())
    check(f"nn.ClassSimplexCriterion({n})", x[0].copy(), int(t[0]), ((x[0] - simplex[t[0] - 1]) ** 2).mean())
    top = numpy_of(call("function(c, x) return c:getTopPrediction(x) end", c, lua(simplex[[2, 0, 4]].copy())))
    np.testing.assert_array_equal(top, [3, 1, 5])
    with pytest.raises(luabridge.LuaError, match=r"target 6 out of range"):
        loss(c, lua(x), lua(np.array([1, 6, 2])))


@pytest.mark.parametrize("shape, tshape", [((2, 3, 4, 5), (2, 3, 7, 6)), ((3, 4, 4), (3, 5, 4))])
def test_spatial_autocrop_mse(rng, shape, tshape):
    x, y = rng.standard_normal(shape), rng.standard_normal(tshape)
    h, w = shape[-2:]
    r0, c0 = (tshape[-2] - h) // 2, (tshape[-1] - w) // 2
    crop = y[..., r0:r0 + h, c0:c0 + w]
    check("nn.SpatialAutoCropMSECriterion()", x, y, ((x - crop) ** 2).mean())
    c = module("nn.SpatialAutoCropMSECriterion(false)")
    with pytest.raises(luabridge.LuaError, match=r"must not exceed"):
        loss(c, lua(y), lua(x))
    with pytest.raises(luabridge.LuaError, match=r"differ in channels"):
        loss(c, lua(np.zeros((3, 3, 3))), lua(np.zeros((4, 3, 3))))
    with pytest.raises(luabridge.LuaError, match=r"differ in batch size"):
        loss(c, lua(np.zeros((2, 3, 3, 3))), lua(np.zeros((1, 3, 3, 3))))
