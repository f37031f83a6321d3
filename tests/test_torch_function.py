"""luabridge.torch.function: compiled graphs as differentiable torch callables, checked with
gradcheck / gradgradcheck and against the same expressions written in PyTorch (float64)."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="luabridge.torch.function needs PyTorch (the torch extra)")

from luabridge.graph import StageError, create  # noqa: E402
from luabridge.torch.function import function  # noqa: E402


def ph(name: str):
    return create("placeholder", name=name, dtype="float64")


def leaf(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64, requires_grad=True)


def _mlp():
    x, w, b, v = ph("x"), ph("w"), ph("b"), ph("v")
    h = create("tanh", create("linear", x, w, b, no_bias=False))
    out = create("softmax", create("matmul", h, v))
    return out, [x, w, b, v]


def _mlp_torch(x, w, b, v):
    return torch.softmax(torch.tanh(x @ w.T + b) @ v, dim=1)


def test_gradcheck_and_gradgradcheck_on_an_mlp():
    out, inputs = _mlp()
    f = function(out, inputs, stages=2)
    args = [leaf(3, 4, seed=1), leaf(5, 4, seed=2), leaf(5, seed=3), leaf(5, 2, seed=4)]
    assert torch.autograd.gradcheck(f, args)
    assert torch.autograd.gradgradcheck(f, args)
    torch.testing.assert_close(f(*args), _mlp_torch(*args), rtol=1e-13, atol=1e-15)


def test_elementwise_and_reductions_match_pytorch():
    x, s = ph("x"), ph("s")
    out = [create("reduce_mean", create("exp", x * s) / (x * x + 1), reduction_indices=[1]),
           create("reduce_sum", create("sqrt", x * x + 2) ** 3 - create("log", x * x + 1) * s)]
    f = function(out, [x, s])
    a, k = leaf(3, 4, seed=5), leaf(1, seed=6)
    assert torch.autograd.gradgradcheck(f, (a, k))
    ours = f(a, k)
    theirs = [(torch.exp(a * k) / (a * a + 1)).mean(dim=1),
              ((a * a + 2).sqrt() ** 3 - torch.log(a * a + 1) * k).sum().reshape(1)]
    for p, q in zip(ours, theirs):
        torch.testing.assert_close(p, q, rtol=1e-13, atol=1e-14)


def test_create_graph_goes_through_it():
    """A gradient penalty: d/dparams of |d loss / d x|^2, through our two stages and PyTorch's."""
    out, inputs = _mlp()
    f = function(out, inputs)
    args = [leaf(3, 4, seed=7), leaf(5, 4, seed=8), leaf(5, seed=9), leaf(5, 2, seed=10)]
    target = torch.tensor([[0.2, 0.8], [0.6, 0.4], [0.5, 0.5]], dtype=torch.float64)
    ours, theirs = [], []
    for fn, into in ((f, ours), (_mlp_torch, theirs)):
        loss = ((fn(*args) - target) ** 2).sum()
        gx, = torch.autograd.grad(loss, args[0], create_graph=True)
        penalty = (gx ** 2).sum() + loss
        into.extend(torch.autograd.grad(penalty, args))
    for p, q in zip(ours, theirs):
        torch.testing.assert_close(p, q, rtol=1e-11, atol=1e-13)


def test_differentiating_past_the_compiled_stages_is_a_stage_error():
    x = ph("x")
    f = function(create("tanh", x) * x, [x], stages=1)
    a = leaf(4, seed=11)
    g, = torch.autograd.grad(f(a).sum(), a, create_graph=True)
    torch.testing.assert_close(g, torch.tanh(a) + a * (1 - torch.tanh(a) ** 2))
    with pytest.raises(StageError, match="compiled for 1 stages"):
        torch.autograd.grad(g.sum(), a)


def test_inputs_must_be_tensors():
    x = ph("x")
    f = function(x * 2, [x])
    with pytest.raises(TypeError, match="input 0 is a list, not a tensor"):
        f([1.0, 2.0])
