"""The criterions whose passes loop over class indices and labels (MultiMarginCriterion,
MultiLabelMarginCriterion, CosineEmbeddingCriterion, ClassSimplexCriterion, and the target range
check they share with ClassNLLCriterion) run those loops as ops of the nn_loss family
(lua/torch/backend/cpu/nn_loss.lua): their front ends name no device and read no pointer. Values
against PyTorch's own modules (MultiMarginLoss, MultiLabelMarginLoss, CosineEmbeddingLoss) and
numpy float64; errors for bad targets as before; a device target gets the criterion's own error."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import luabridge
from helpers import N, T, lua_fn

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parent.parent
FRONT_ENDS = ["lua/nn/MultiMarginCriterion.lua", "lua/nn/MultiLabelMarginCriterion.lua",
              "lua/nn/CosineEmbeddingCriterion.lua", "lua/nn/ClassSimplexCriterion.lua",
              "lua/nn/util/targets.lua"]


@pytest.mark.parametrize("path", FRONT_ENDS)
def test_the_front_ends_read_no_pointer(path):
    src = (ROOT / path).read_text()
    assert ".ptr" not in src and "ptr(" not in src, f"{path} reads tensor memory through a pointer"


_CRIT = lua_fn("""function(make, x, t, sizeAverage)
  require 'nn'
  local c = loadstring('return ' .. make)()
  if sizeAverage ~= nil then c.sizeAverage = sizeAverage end
  local l = c:forward(x, t)
  return l, c:backward(x, t):clone()
end""")


def _torch_grad(loss_fn, x, *args):
    xt = torch.tensor(x, requires_grad=True)
    loss = loss_fn(xt, *args)
    loss.backward()
    return loss.item(), xt.grad.numpy()


@pytest.mark.parametrize("dtype, tol", [(np.float64, 1e-12), (np.float32, 2e-6)])
@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("size_average", [True, False])
@pytest.mark.parametrize("shape", [(5, 7), (7,)])
def test_multi_margin_matches_pytorch(dtype, tol, p, weighted, size_average, shape):
    rng = np.random.default_rng(p * 10 + weighted)
    x = rng.standard_normal(shape).astype(dtype)
    classes = shape[-1]
    nframe = 1 if len(shape) == 1 else shape[0]
    t = rng.integers(1, classes + 1, nframe).astype(np.float64)
    w = rng.uniform(0.5, 2, classes) if weighted else None
    make = f"nn.MultiMarginCriterion({p}, {'torch.Tensor({' + ','.join(repr(float(v)) for v in w) + '})' if weighted else 'nil'}, 0.7)"
    if dtype == np.float32:
        make += ":float()"
    loss, grad = _CRIT(make, T(x), T(t), size_average)
    fn = torch.nn.MultiMarginLoss(p=p, margin=0.7, weight=None if w is None else torch.tensor(w, dtype=torch.float64),
                                  reduction="mean" if size_average else "sum")
    xt = x.astype(np.float64).reshape(nframe, classes)
    want, want_grad = _torch_grad(fn, xt, torch.tensor(t.astype(np.int64) - 1))
    assert loss == pytest.approx(want, rel=tol, abs=tol)
    np.testing.assert_allclose(N(grad).reshape(nframe, classes), want_grad, rtol=tol * 10, atol=tol)


@pytest.mark.parametrize("dtype, tol", [(np.float64, 1e-12), (np.float32, 2e-6)])
@pytest.mark.parametrize("size_average", [True, False])
def test_multi_label_margin_matches_pytorch(dtype, tol, size_average):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 6)).astype(dtype)
    t = np.zeros((4, 6))
    for i, k in enumerate([1, 3, 6, 0]):
        t[i, :k] = rng.permutation(6)[:k] + 1
    make = "nn.MultiLabelMarginCriterion()" + (":float()" if dtype == np.float32 else "")
    loss, grad = _CRIT(make, T(x), T(t), size_average)
    fn = torch.nn.MultiLabelMarginLoss(reduction="mean" if size_average else "sum")
    want, want_grad = _torch_grad(fn, x.astype(np.float64), torch.tensor(t.astype(np.int64) - 1))
    assert loss == pytest.approx(want, rel=tol, abs=tol)
    np.testing.assert_allclose(N(grad), want_grad, rtol=tol * 10, atol=tol)


_COSINE = lua_fn("""function(x1, x2, y, margin, sizeAverage)
  require 'nn'
  local c = nn.CosineEmbeddingCriterion(margin)
  c.sizeAverage = sizeAverage
  local l = c:forward({ x1, x2 }, y)
  local g = c:backward({ x1, x2 }, y)
  return l, g[1]:clone(), g[2]:clone()
end""")


@pytest.mark.parametrize("size_average", [True, False])
@pytest.mark.parametrize("margin", [0.0, 0.3])
def test_cosine_embedding_matches_pytorch(size_average, margin):
    rng = np.random.default_rng(5)
    x1, x2 = rng.standard_normal((6, 5)), rng.standard_normal((6, 5))
    x2[1] = x1[1] * 2 + 0.01      # a near-parallel pair
    y = np.array([1, -1, -1, 1, -1, 1], dtype=np.float64)
    loss, g1, g2 = _COSINE(T(x1), T(x2), T(y), margin, size_average)
    a, b = torch.tensor(x1, requires_grad=True), torch.tensor(x2, requires_grad=True)
    want = torch.nn.CosineEmbeddingLoss(margin=margin, reduction="mean" if size_average else "sum")(
        a, b, torch.tensor(y))
    want.backward()
    assert loss == pytest.approx(want.item(), rel=1e-10, abs=1e-12)
    np.testing.assert_allclose(N(g1), a.grad.numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(N(g2), b.grad.numpy(), rtol=1e-9, atol=1e-12)
    # one pair, a number label
    loss1, _, _ = _COSINE(T(x1[0].copy()), T(x2[0].copy()), -1, margin, size_average)
    c = x1[0] @ x2[0] / np.sqrt((x1[0] @ x1[0] + 1e-12) * (x2[0] @ x2[0] + 1e-12))
    assert loss1 == pytest.approx(max(0.0, c - margin), rel=1e-12, abs=1e-15)


def test_class_simplex_against_numpy():
    f = lua_fn("""function(x, t)
      require 'nn'
      local c = nn.ClassSimplexCriterion(4)
      local l = c:forward(x, t)
      return l, c:backward(x, t):clone(), c.simplex:clone()
    end""")
    rng = np.random.default_rng(9)
    x = rng.standard_normal((5, 4))
    t = np.array([1, 4, 2, 2, 3], dtype=np.float64)
    loss, grad, simplex = f(T(x), T(t))
    s = N(simplex)
    target = s[t.astype(int) - 1]
    assert loss == pytest.approx(((x - target) ** 2).mean(), rel=1e-12)
    np.testing.assert_allclose(N(grad), 2 * (x - target) / x.size, rtol=1e-12)
    # the simplex: unit vertices with dot products -1/(n-1)
    np.testing.assert_allclose(s @ s.T, np.where(np.eye(4) > 0, 1.0, -1 / 3), atol=1e-12)


_ERR = lua_fn("""function(code)
  require 'nn'
  local ok, e = pcall(loadstring(code))
  return ok and 'ok' or tostring(e)
end""")


@pytest.mark.parametrize("code, message", [
    ("nn.MultiMarginCriterion():forward(torch.rand(2, 3), torch.Tensor{1, 4})",
     "nn.MultiMarginCriterion: target 4 out of range, expected a class index in [1, 3]"),
    ("nn.MultiMarginCriterion():forward(torch.rand(2, 3), torch.Tensor{0, 1})",
     "nn.MultiMarginCriterion: target 0 out of range, expected a class index in [1, 3]"),
    ("nn.MultiMarginCriterion():forward(torch.rand(2, 3), torch.Tensor{1.5, 1})",
     "nn.MultiMarginCriterion: target 1.5 out of range, expected a class index in [1, 3]"),
    ("nn.ClassSimplexCriterion(3):forward(torch.rand(2, 3), torch.Tensor{1, 5})",
     "nn.ClassSimplexCriterion: target 5 out of range, expected a class index in [1, 3]"),
    ("nn.ClassNLLCriterion():forward(torch.rand(2, 3), torch.LongTensor{1, 9})",
     "nn.ClassNLLCriterion: target 9 out of range, expected a class index in [1, 3]"),
    ("nn.MultiLabelMarginCriterion():forward(torch.rand(2, 3), torch.Tensor{{1, 4, 0}, {1, 0, 0}})",
     "nn.MultiLabelMarginCriterion: target out of range, expected class indices in [1, 3] or 0, got values in [0, 4]"),
    ("nn.CosineEmbeddingCriterion():forward({torch.rand(2, 3), torch.rand(2, 3)}, torch.Tensor{1, 0})",
     "nn.CosineEmbeddingCriterion: labels must be 1 or -1, got values in [0, 1]"),
])
def test_bad_targets_keep_their_errors(code, message):
    assert message in _ERR(code)


def test_a_device_target_gets_the_criterions_error():
    from luabridge import cuda
    cuda.use_array_module(np)   # numpy standing in for the device's arrays
    try:
        for code, name in [
            ("nn.MultiMarginCriterion():forward(torch.rand(2, 3), torch.Tensor{1, 2}:cuda())", "MultiMarginCriterion"),
            ("nn.MultiLabelMarginCriterion():forward(torch.rand(1, 3), torch.Tensor{{1, 0, 0}}:cuda())",
             "MultiLabelMarginCriterion"),
            ("nn.CosineEmbeddingCriterion():forward({torch.rand(2, 3), torch.rand(2, 3)}, torch.Tensor{1, -1}:cuda())",
             "CosineEmbeddingCriterion"),
        ]:
            msg = _ERR("require 'cutorch'; " + code)
            assert f"nn.{name}: torch.Cuda" in msg and "is not supported yet (CPU tensors only)" in msg, msg
    finally:
        cuda.use_array_module(None)


def test_the_ops_exist_on_both_devices():
    f = lua_fn("""function()
      require 'nn'
      local ok = pcall(require, 'cutorch')
      local backend = require 'torch.backend'
      local names = { 'class_target_check', 'multi_margin_forward', 'multi_margin_backward',
        'multi_label_margin_mark', 'multi_label_margin', 'cosine_embedding_forward', 'cosine_embedding_coef' }
      local out = {}
      for _, n in ipairs(names) do
        out[#out + 1] = n .. '=' .. type(backend.cpu[n]) .. '/' .. type(ok and backend.cuda[n])
      end
      local e = select(2, pcall(backend.cuda.multi_margin_forward))
      return table.concat(out, ' '), tostring(e)
    end""")
    from luabridge import cuda
    cuda.use_array_module(np)
    try:
        names, err = f()
    finally:
        cuda.use_array_module(None)
    assert "nil" not in names and "boolean" not in names, names
    assert "multi_margin_forward is not available for CUDA tensors" in err
