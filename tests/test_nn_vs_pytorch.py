"""Our Lua nn criterions and a few layers against PyTorch CPU (torch.nn.functional + autograd),
float64, batch and single inputs. Skipped when PyTorch is not installed.

Name clash: in this file `pt` is PyTorch; our torch7-compatible Lua library is reached through
luabridge. Conventions that differ by definition and are mapped here:
- class targets are 1-based in torch7 and 0-based in PyTorch (ClassNLL, CrossEntropy, MultiMargin);
  ClassNLLCriterion's ignoreIndex is a 1-based class value, PyTorch's ignore_index a 0-based one;
- MultiLabelMarginCriterion targets: torch7 lists 1-based classes ended by a 0, PyTorch 0-based
  classes ended by a -1 (so PyTorch target = torch7 target - 1);
- torch7's single-sample forms (1D input) match PyTorch's batch of one.
- BatchNormalization's running_var takes the unbiased batch variance in both libraries.
Relations asserted instead of equality: DistKLDivCriterion averages over all elements (PyTorch's
deprecated reduction='mean', written here as sum / numel); ClassNLLCriterion with every target
ignored gives 0 where PyTorch gives nan; BCE (log(x + 1e-12) vs a log clamped at -100) and
CosineEmbedding (different eps placement) agree to a looser tolerance.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import luabridge
from helpers import lua_value, numpy_of
from nn_layers_check import backward, call, field, forward, module

pt = pytest.importorskip("torch")
F = pt.nn.functional

_RUN = "function(c, x, y) local l = c:forward(x, y); return l, c:backward(x, y) end"


def ours(code: str, x: Any, y: Any) -> tuple[float, Any]:
    """Loss and gradInput (numpy, a list for table inputs) of the Lua criterion `code`."""
    c = module(code)
    lx = lua_value(x)
    ly = lua_value(y) if isinstance(y, np.ndarray) else y
    l, g = call(_RUN, c, lx, ly)
    return float(l), numpy_of(g)


def theirs(fn: Callable[..., Any], x: Any) -> tuple[float, Any]:
    """PyTorch loss fn(*inputs) and its gradients by autograd."""
    xs = x if isinstance(x, list) else [x]
    ts = [pt.tensor(a, dtype=pt.float64, requires_grad=True) for a in xs]
    out = fn(*ts)
    out.backward()
    grads = [t.grad.numpy() for t in ts]
    return float(out.detach()), grads if isinstance(x, list) else grads[0]


def same(code: str, x: Any, y: Any, fn: Callable[..., Any], tol: float = 1e-10) -> None:
    """Our criterion `code` on (x, y) gives PyTorch's fn(x) and its autograd gradients."""
    l, g = ours(code, x, y)
    want_l, want_g = theirs(fn, x)
    assert l == pytest.approx(want_l, rel=tol, abs=tol)
    for a, b in zip(g if isinstance(x, list) else [g], want_g if isinstance(x, list) else [want_g]):
        np.testing.assert_allclose(a, b, rtol=tol * 100, atol=tol)


def red(size_average: bool) -> str:
    return "mean" if size_average else "sum"


def t64(a: np.ndarray) -> Any:
    return pt.tensor(a, dtype=pt.float64)


def lua_list(a: np.ndarray) -> str:
    """A Lua expression making a 1D DoubleTensor of a's values."""
    return "torch.Tensor({%s})" % ",".join(repr(float(v)) for v in np.asarray(a).reshape(-1))


def lbool(b: bool) -> str:
    return "true" if b else "false"


SHAPES = [(4, 5), (5,)]


@pytest.fixture
def rng():
    return np.random.default_rng(7)


# ----------------------------------------------------------------------------------------------
# elementwise regression criterions

@pytest.mark.parametrize("shape", SHAPES + [(2, 3, 4)])
@pytest.mark.parametrize("avg", [True, False])
def test_mse_abs_smoothl1(rng, shape, avg):
    x, y = rng.standard_normal(shape), rng.standard_normal(shape)
    for name, fn in [("MSECriterion", F.mse_loss), ("AbsCriterion", F.l1_loss),
                     ("SmoothL1Criterion", F.smooth_l1_loss)]:
        same(f"nn.{name}({lbool(avg)})", x, y, lambda a: fn(a, t64(y), reduction=red(avg)))


@pytest.mark.parametrize("shape", SHAPES)
def test_distkldiv(rng, shape):
    x = np.log(rng.uniform(0.05, 1, shape))
    y = rng.uniform(0.05, 1, shape)
    # torch7 averages over every element (PyTorch's deprecated reduction='mean', not 'batchmean')
    same("nn.DistKLDivCriterion()", x, y, lambda a: F.kl_div(a, t64(y), reduction="sum") / x.size)
    same(summed("nn.DistKLDivCriterion()"), x, y, lambda a: F.kl_div(a, t64(y), reduction="sum"))


@pytest.mark.parametrize("shape", SHAPES)
def test_soft_margin(rng, shape):
    x, y = rng.standard_normal(shape) * 2, rng.choice([-1.0, 1.0], shape)
    same("nn.SoftMarginCriterion()", x, y, lambda a: F.soft_margin_loss(a, t64(y)))


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("avg", [True, False])
def test_bce(rng, shape, weighted, avg):
    x, y = rng.uniform(0.05, 0.95, shape), rng.uniform(0, 1, shape)
    w = rng.uniform(0.5, 2, shape[-1])
    # torch7 takes log(x + 1e-12); PyTorch clamps the log at -100: equal to ~1e-11 here
    code = f"nn.BCECriterion({lua_list(w) if weighted else 'nil'}, {lbool(avg)})"
    weight = t64(w) if weighted else None
    same(code, x, y, lambda a: F.binary_cross_entropy(a, t64(y), weight=weight, reduction=red(avg)),
         tol=1e-9)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("weighted", [False, True])
def test_multilabel_soft_margin(rng, shape, weighted):
    x, y = rng.standard_normal(shape) * 2, rng.integers(0, 2, shape).astype(np.float64)
    w = rng.uniform(0.5, 2, shape[-1])
    code = "nn.MultiLabelSoftMarginCriterion(%s)" % (lua_list(w) if weighted else "")
    weight = t64(w) if weighted else None
    x2, y2 = np.atleast_2d(x), np.atleast_2d(y)
    # both average over all N*C elements (PyTorch: over classes, then over the batch)
    same(code, x, y, lambda a: F.multilabel_soft_margin_loss(a.reshape(x2.shape), t64(y2),
                                                               weight=weight))


# ----------------------------------------------------------------------------------------------
# class-target criterions

def class_case(rng, batch: bool, n: int = 6, c: int = 5):
    x = rng.standard_normal((n, c) if batch else (c,))
    y = rng.integers(1, c + 1, n if batch else 1)
    return x, y


def lua_target(y: np.ndarray, batch: bool) -> Any:
    """torch7 targets: a DoubleTensor (batch) or a plain number (single)."""
    return luabridge.from_numpy(y.astype(np.float64)) if batch else float(y[0])


def pt_target(y: np.ndarray) -> Any:
    return pt.tensor(y - 1, dtype=pt.int64)


def batched(f: Callable[[Any], Any], batch: bool) -> Callable[[Any], Any]:
    return f if batch else (lambda a: f(a.unsqueeze(0)))


@pytest.mark.parametrize("batch", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("avg", [True, False])
def test_class_nll_and_cross_entropy(rng, batch, weighted, avg):
    x, y = class_case(rng, batch)
    w = rng.uniform(0.5, 2, 5)
    wcode = lua_list(w) if weighted else "nil"
    weight = t64(w) if weighted else None
    lp = F.log_softmax(t64(x), -1).numpy()
    nll = lambda a: F.nll_loss(a, pt_target(y), weight=weight, reduction=red(avg))
    same_target(f"nn.ClassNLLCriterion({wcode}, {lbool(avg)})", lp, y, batch, batched(nll, batch))
    ce = lambda a: F.cross_entropy(a, pt_target(y), weight=weight, reduction=red(avg))
    same_target(f"nn.CrossEntropyCriterion({wcode}, {lbool(avg)})", x, y, batch,
                batched(ce, batch))


def same_target(code: str, x: np.ndarray, y: np.ndarray, batch: bool,
                fn: Callable[[Any], Any], tol: float = 1e-10) -> None:
    c = module(code)
    l, g = call(_RUN, c, luabridge.from_numpy(x), lua_target(y, batch))
    want_l, want_g = theirs(fn, x)
    assert float(l) == pytest.approx(want_l, rel=tol, abs=tol)
    np.testing.assert_allclose(numpy_of(g), want_g, rtol=tol * 100, atol=tol)


@pytest.mark.parametrize("avg", [True, False])
def test_class_nll_ignore_index(rng, avg):
    x = F.log_softmax(t64(rng.standard_normal((8, 4))), -1).numpy()
    y = np.array([1, 3, 3, 2, 4, 3, 1, 2])
    w = rng.uniform(0.5, 2, 4)
    fn = lambda a: F.nll_loss(a, pt_target(y), weight=t64(w), ignore_index=2, reduction=red(avg))
    same_target(f"nn.ClassNLLCriterion({lua_list(w)}, {lbool(avg)}, 3)", x, y, True, fn)


def test_class_nll_all_ignored_is_zero_not_nan(rng):
    """Documented difference: with every target ignored, torch7's THNN skips the division by the
    zero total weight and returns 0, where PyTorch's mean returns 0/0 = nan. Both give gradInput 0."""
    x = rng.standard_normal((3, 4))
    y = np.array([2, 2, 2])
    l, g = call(_RUN, module("nn.ClassNLLCriterion(nil, true, 2)"), luabridge.from_numpy(x),
                luabridge.from_numpy(y.astype(np.float64)))
    want_l, want_g = theirs(lambda a: F.nll_loss(a, pt_target(y), ignore_index=1), x)
    assert np.isnan(want_l) and float(l) == 0.0
    np.testing.assert_array_equal(numpy_of(g), want_g)


def test_non_contiguous_inputs(rng):
    """Transposed and strided numpy views reach Lua as non-contiguous tensors."""
    x, y = rng.standard_normal((5, 4)).T, rng.standard_normal((4, 10))[:, ::2]
    same("nn.MSECriterion()", x, y, lambda a: F.mse_loss(a, t64(y)))
    same("nn.SmoothL1Criterion()", x, y, lambda a: F.smooth_l1_loss(a, t64(y)))
    lp = F.log_softmax(t64(rng.standard_normal((5, 4))), -1).numpy().T
    t = rng.integers(1, 5, 4)
    same_target("nn.ClassNLLCriterion()", lp, t, True, lambda a: F.nll_loss(a, pt_target(t)))
    layer_vs(module("nn.LogSoftMax()"), rng.standard_normal((7, 3)).T,
             lambda a: F.log_softmax(a, -1), {}, rng)


@pytest.mark.parametrize("batch", [True, False])
@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("margin", [1.0, 0.4])
@pytest.mark.parametrize("weighted", [False, True])
def test_multi_margin(rng, batch, p, margin, weighted):
    x, y = class_case(rng, batch)
    w = rng.uniform(0.5, 2, 5)
    weight = t64(w) if weighted else None
    code = f"nn.MultiMarginCriterion({p}, {lua_list(w) if weighted else 'nil'}, {margin})"
    fn = lambda a: F.multi_margin_loss(a, pt_target(y), p=p, margin=margin, weight=weight)
    same_target(code, x, y, batch, batched(fn, batch))


@pytest.mark.parametrize("batch", [True, False])
def test_multilabel_margin(rng, batch):
    n, c = 5, 6
    x = rng.standard_normal((n, c))
    y = np.zeros((n, c), np.int64)
    for i in range(n):  # k listed 1-based classes, then a 0 (unless all are listed)
        k = int(rng.integers(0 if i else c, c + 1))
        y[i, :k] = rng.permutation(c)[:k] + 1
    if not batch:
        x, y = x[1], y[1]
    fn = lambda a: F.multilabel_margin_loss(a, pt.tensor(y - 1))  # 0 -> -1 end marker
    same("nn.MultiLabelMarginCriterion()", x, y.astype(np.float64), fn)


# ----------------------------------------------------------------------------------------------
# embedding / ranking criterions

@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("margin", [1.0, 0.5])
def test_hinge_embedding(rng, shape, margin):
    x, y = rng.uniform(0, 2, shape), rng.choice([-1.0, 1.0], shape)
    x = np.where(np.abs(x - margin) < 0.05, x + 0.1, x)
    same(f"nn.HingeEmbeddingCriterion({margin})", x, y,
         lambda a: F.hinge_embedding_loss(a, t64(y), margin=margin))


@pytest.mark.parametrize("batch", [True, False])
@pytest.mark.parametrize("margin", [0.0, 0.3])
def test_cosine_embedding(rng, batch, margin):
    n, d = 6, 4
    a, b = rng.standard_normal((n, d)), rng.standard_normal((n, d))
    y = rng.choice([-1.0, 1.0], n)
    if batch:
        ly: Any = y
        fn = lambda p, q: F.cosine_embedding_loss(p, q, t64(y), margin=margin)
    else:
        a, b, ly = a[0], b[0], float(y[0])
        fn = lambda p, q: F.cosine_embedding_loss(p[None], q[None], t64(y[:1]), margin=margin)
    # both add eps (torch7 1e-12 to the squared norms, PyTorch 1e-8 to the product), so 1e-7
    same(f"nn.CosineEmbeddingCriterion({margin})", [a, b], ly, fn, tol=1e-7)


@pytest.mark.parametrize("batch", [True, False])
@pytest.mark.parametrize("margin", [0.0, 0.5])
def test_margin_ranking(rng, batch, margin):
    n = 7 if batch else 1
    a, b = rng.standard_normal(n), rng.standard_normal(n)
    y = rng.choice([-1.0, 1.0], n)
    ly: Any = y if batch else float(y[0])
    same(f"nn.MarginRankingCriterion({margin})", [a, b], ly,
         lambda p, q: F.margin_ranking_loss(p, q, t64(y), margin=margin))


def summed(code: str) -> str:
    """A Lua expression making the criterion `code` with sizeAverage = false."""
    return "(function() local c = %s; c.sizeAverage = false; return c end)()" % code


def test_size_average_false(rng):
    """Criterions whose constructor takes no sizeAverage, summed: PyTorch's reduction='sum'."""
    x, s = rng.standard_normal((4, 5)) * 2, rng.choice([-1.0, 1.0], (4, 5))
    same(summed("nn.SoftMarginCriterion()"), x, s,
         lambda a: F.soft_margin_loss(a, t64(s), reduction="sum"))
    same(summed("nn.HingeEmbeddingCriterion(0.7)"), np.abs(x), s,
         lambda a: F.hinge_embedding_loss(a, t64(s), margin=0.7, reduction="sum"))
    y = rng.integers(1, 6, 4)
    fn = lambda a: F.multi_margin_loss(a, pt_target(y), p=2, margin=0.5, reduction="sum")
    same_target(summed("nn.MultiMarginCriterion(2, nil, 0.5)"), x, y, True, fn)
    t = np.array([[2, 5, 0, 0, 0], [1, 2, 3, 4, 5], [4, 0, 3, 0, 0], [0, 1, 0, 0, 0]])
    same(summed("nn.MultiLabelMarginCriterion()"), x, t.astype(np.float64),
         lambda a: F.multilabel_margin_loss(a, pt.tensor(t - 1), reduction="sum"))
    a, b, r = rng.standard_normal(6), rng.standard_normal(6), rng.choice([-1.0, 1.0], 6)
    same(summed("nn.MarginRankingCriterion(0.2)"), [a, b], r,
         lambda p, q: F.margin_ranking_loss(p, q, t64(r), margin=0.2, reduction="sum"))
    same(summed("nn.CosineEmbeddingCriterion(0.1)"), [x, x[::-1].copy()], s[:, 0],
         lambda p, q: F.cosine_embedding_loss(p, q, t64(s[:, 0]), margin=0.1, reduction="sum"),
         tol=1e-7)


# ----------------------------------------------------------------------------------------------
# layers: forward, gradInput (autograd of sum(out * g)) and parameter gradients

def layer_vs(m: Any, x: np.ndarray, fn: Callable[..., Any], params: dict[str, np.ndarray],
             rng, tol: float = 1e-10) -> None:
    """Our module m against PyTorch fn(x, **params), which must compute the same map."""
    out = forward(m, x)
    tx = pt.tensor(x, requires_grad=True)
    tp = {k: pt.tensor(v, requires_grad=True) for k, v in params.items()}
    want = fn(tx, **tp)
    np.testing.assert_allclose(out, want.detach().numpy(), rtol=tol * 100, atol=tol)
    g = rng.standard_normal(out.shape)
    (want * t64(g)).sum().backward()
    np.testing.assert_allclose(backward(m, x, g), tx.grad.numpy(), rtol=tol * 100, atol=tol)
    for k, v in tp.items():
        name = "grad" + k[0].upper() + k[1:]
        np.testing.assert_allclose(field(m, name), v.grad.numpy(), rtol=tol * 100, atol=tol)


@pytest.mark.parametrize("shape", [(4, 7), (7,)])
def test_log_softmax(rng, shape):
    layer_vs(module("nn.LogSoftMax()"), rng.standard_normal(shape) * 3,
             lambda a: F.log_softmax(a, -1), {}, rng)


@pytest.mark.parametrize("cls,shape", [("BatchNormalization", (8, 3)),
                                       ("SpatialBatchNormalization", (4, 3, 5, 2))])
@pytest.mark.parametrize("affine", [True, False])
def test_batchnorm_train_then_evaluate(rng, cls, shape, affine):
    m = module(f"nn.{cls}(3, 1e-5, 0.2, {lbool(affine)})")
    params = {}
    if affine:
        for k in ("weight", "bias"):
            field(m, k)[:] = params.setdefault(k, rng.standard_normal(3))
    mean, var = field(m, "running_mean").copy(), field(m, "running_var").copy()
    x = rng.standard_normal(shape) * 2 + 1
    fn = lambda a, **p: F.batch_norm(a, t64(mean), t64(var), p.get("weight"), p.get("bias"),
                                     training=True, momentum=0.2, eps=1e-5)
    layer_vs(m, x, fn, params, rng, tol=1e-9)
    # running stats after one step (PyTorch uses the unbiased variance too)
    rm, rv = t64(mean), t64(var)
    F.batch_norm(t64(x), rm, rv, training=True, momentum=0.2, eps=1e-5)
    np.testing.assert_allclose(field(m, "running_mean"), rm.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(field(m, "running_var"), rv.numpy(), rtol=1e-12, atol=1e-12)
    call("function(m) m:evaluate() end", m)
    fn = lambda a, **p: F.batch_norm(a, rm, rv, p.get("weight"), p.get("bias"),
                                     training=False, eps=1e-5)
    layer_vs(m, rng.standard_normal(shape), fn, params, rng, tol=1e-9)


@pytest.mark.parametrize("stride,pad", [((1, 1), (0, 0)), ((2, 1), (1, 2))])
@pytest.mark.parametrize("batch", [True, False])
def test_spatial_convolution(rng, stride, pad, batch):
    m = module(f"nn.SpatialConvolution(3, 4, 3, 2, {stride[0]}, {stride[1]}, {pad[0]}, {pad[1]})")
    w, b = rng.standard_normal((4, 3, 2, 3)), rng.standard_normal(4)
    field(m, "weight")[:] = w.reshape(field(m, "weight").shape)
    field(m, "bias")[:] = b
    x = rng.standard_normal((2, 3, 6, 7) if batch else (3, 6, 7))

    def fn(a, weight, bias):
        a = a if batch else a[None]
        out = F.conv2d(a, weight.reshape(4, 3, 2, 3), bias, stride=stride[::-1], padding=pad[::-1])
        return out if batch else out[0]
    layer_vs(m, x, fn, {"weight": field(m, "weight").copy(), "bias": b}, rng, tol=1e-9)


# kW, kH, dW, dH, padW, padH on 7x8 inputs: in ceil mode windows overhang the input, and with
# (2, 2, 2, 2, 1, 1) the last row of windows would start in the padding, so both libraries drop it
POOLS = [(3, 2, 2, 2, 1, 0), (3, 2, 3, 2, 0, 1), (3, 3, 2, 2, 1, 1), (2, 2, 2, 2, 1, 1)]


@pytest.mark.parametrize("k", POOLS)
@pytest.mark.parametrize("ceil", [False, True])
@pytest.mark.parametrize("batch", [True, False])
def test_spatial_max_pooling(rng, k, ceil, batch):
    kW, kH, dW, dH, padW, padH = k
    m = module(f"nn.SpatialMaxPooling({kW}, {kH}, {dW}, {dH}, {padW}, {padH})"
               + (":ceil()" if ceil else ""))
    x = rng.permutation(2 * 3 * 7 * 8).reshape(2, 3, 7, 8) / 10.0  # no ties
    x = x if batch else x[0]
    fn = lambda a: F.max_pool2d(a, (kH, kW), (dH, dW), (padH, padW), ceil_mode=ceil)
    layer_vs(m, x, fn, {}, rng)


@pytest.mark.parametrize("k", POOLS)
@pytest.mark.parametrize("ceil", [False, True])
@pytest.mark.parametrize("include", [True, False])
def test_spatial_average_pooling(rng, k, ceil, include):
    kW, kH, dW, dH, padW, padH = k
    code = f"nn.SpatialAveragePooling({kW}, {kH}, {dW}, {dH}, {padW}, {padH})"
    code += (":ceil()" if ceil else "") + (":setCountIncludePad()" if include
                                             else ":setCountExcludePad()")
    for x in (rng.standard_normal((2, 3, 7, 8)), rng.standard_normal((3, 7, 8))):
        fn = lambda a: F.avg_pool2d(a, (kH, kW), (dH, dW), (padH, padW), ceil_mode=ceil,
                                    count_include_pad=include)
        layer_vs(module(code), x, fn, {}, rng)
