"""luabridge.torch.LuaModule: Lua nn modules inside PyTorch autograd, checked against PyTorch's own
modules holding the same weights, and against gradcheck's finite differences."""
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is missing (pip install torch): luabridge.torch needs it")

import numpy as np  # noqa: E402

from luabridge import nn  # noqa: E402
from luabridge.torch import LuaModule  # noqa: E402

D = torch.float64


def mlp() -> tuple[LuaModule, torch.nn.Sequential]:
    """The same 4-5-3 tanh MLP in Lua (wrapped) and in PyTorch, weights copied from Lua."""
    lua = LuaModule("nn.Sequential():add(nn.Linear(4, 5)):add(nn.Tanh()):add(nn.Linear(5, 3))")
    ref = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.Tanh(), torch.nn.Linear(5, 3)).to(D)
    with torch.no_grad():
        for (name, p), q in zip(lua.named_parameters(), ref.parameters()):
            q.copy_(p)
    return lua, ref


def test_linear_matches_torch_linear_forward_and_backward():
    lua = LuaModule("nn.Linear(4, 3)")
    ref = torch.nn.Linear(4, 3).to(D)
    with torch.no_grad():
        ref.weight.copy_(lua.weight)
        ref.bias.copy_(lua.bias)
    x = torch.randn(6, 4, dtype=D)
    xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
    w = torch.randn(6, 3, dtype=D)
    ya, yb = lua(xa), ref(xb)
    torch.testing.assert_close(ya, yb, rtol=0, atol=1e-12)
    (ya * w).sum().backward()
    (yb * w).sum().backward()
    torch.testing.assert_close(xa.grad, xb.grad, rtol=0, atol=1e-12)
    torch.testing.assert_close(lua.weight.grad, ref.weight.grad, rtol=0, atol=1e-12)
    torch.testing.assert_close(lua.bias.grad, ref.bias.grad, rtol=0, atol=1e-12)


def test_mlp_matches_torch_sequential_and_grads_accumulate():
    lua, ref = mlp()
    x = torch.randn(7, 4, dtype=D)
    for _ in range(2):   # .grad adds up over backwards, as in PyTorch
        lua(x).pow(2).sum().backward()
        ref(x).pow(2).sum().backward()
    torch.testing.assert_close(lua(x), ref(x), rtol=0, atol=1e-12)
    for (name, p), q in zip(lua.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=0, atol=1e-12, msg=name)


def test_gradcheck_float64():
    lua = LuaModule(nn.Sequential().add(nn.Linear(3, 4)).add(nn.Sigmoid()).add(nn.Linear(4, 2)))
    x = torch.randn(2, 3, dtype=D, requires_grad=True)
    assert torch.autograd.gradcheck(lua, (x,))
    # the parameters' gradients too: a function of the weight, finite differences against backward
    weight = lua.get_parameter("1.weight")

    def of_weight(w):
        with torch.no_grad():
            weight.copy_(w)
        weight.grad = None
        return lua(x.detach())

    w0 = weight.detach().clone()
    analytic = []
    for k in range(2):
        for j in range(2):
            weight.grad = None
            with torch.no_grad():
                weight.copy_(w0)
            lua(x.detach())[k, j].backward()
            analytic.append(weight.grad.clone())
    eps = 1e-6
    for idx in [(0, 0), (2, 1), (3, 2)]:
        for n, (k, j) in enumerate([(0, 0), (0, 1), (1, 0), (1, 1)]):
            up, down = w0.clone(), w0.clone()
            up[idx] += eps
            down[idx] -= eps
            numeric = (of_weight(up)[k, j] - of_weight(down)[k, j]) / (2 * eps)
            assert abs(numeric.item() - analytic[n][idx].item()) < 1e-7


def test_parameter_names_follow_the_lua_tree():
    inner = nn.Sequential().add(nn.Tanh()).add(nn.Linear(3, 2))
    lua = LuaModule(nn.Sequential().add(nn.Linear(4, 3)).add(nn.ReLU()).add(inner))
    assert [n for n, _ in lua.named_parameters()] == ["1.weight", "1.bias", "3.2.weight", "3.2.bias"]
    assert list(lua.state_dict()) == ["1.weight", "1.bias", "3.2.weight", "3.2.bias"]
    assert [n for n, _ in LuaModule("nn.Linear(2, 2)").named_parameters()] == ["weight", "bias"]


def test_parameters_share_memory_with_the_lua_weights():
    linear = nn.Linear(3, 2)
    lua = LuaModule(linear)
    with torch.no_grad():
        lua.weight[1, 2] = 7.5          # torch -> Lua
    assert np.asarray(linear.weight)[1, 2] == 7.5
    np.asarray(linear.bias)[0] = -3.25  # Lua -> torch
    assert lua.bias[0].item() == -3.25
    assert lua.weight.data_ptr() == linear.weight.numpy().ctypes.data


def test_optimizer_step_changes_the_lua_weights():
    linear = nn.Linear(3, 2)
    lua = LuaModule(linear)
    before = np.array(linear.weight)
    x = torch.randn(5, 3, dtype=D)
    opt = torch.optim.SGD(lua.parameters(), lr=0.1)
    lua(x).sum().backward()
    # d(sum(x W^T + b))/dW[i, j] = sum over the batch of x[:, j], for every row i
    expected_grad = np.tile(x.numpy().sum(0), (2, 1))
    np.testing.assert_allclose(lua.weight.grad.numpy(), expected_grad, rtol=1e-12)
    opt.step()
    np.testing.assert_allclose(np.asarray(linear.weight), before - 0.1 * expected_grad, rtol=1e-12)
    out = np.asarray(linear.forward(x.numpy()))   # Lua's own forward sees the stepped weights
    np.testing.assert_allclose(out, lua(x).detach().numpy(), rtol=0, atol=1e-12)


def test_train_and_eval_switch_the_lua_module():
    dropout = nn.Dropout(0.5)
    lua = LuaModule(nn.Sequential().add(dropout))
    assert lua.training and dropout.train is True
    assert lua.eval() is lua and not lua.training and dropout.train is False
    x = torch.ones(4, 6, dtype=D)
    torch.testing.assert_close(lua(x), x)   # evaluate(): Dropout passes its input through
    lua.train()
    assert dropout.train is True
    y = lua(x)
    assert set(np.unique(y.numpy())) <= {0.0, 2.0} and (y == 0).any()


def test_second_backward_through_one_forward_is_an_error():
    lua, _ = mlp()
    y = lua(torch.randn(3, 4, dtype=D)).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="second backward through the same forward"):
        y.backward()


def test_backward_after_another_forward_uses_its_own_call():
    lua, ref = mlp()
    x1, x2 = torch.randn(3, 4, dtype=D), torch.randn(5, 4, dtype=D)
    a1 = x1.clone().requires_grad_()
    y1 = lua(a1)
    lua(x2)                     # the Lua module now holds x2's state
    y1.sum().backward()
    b1 = x1.clone().requires_grad_()
    ref(b1).sum().backward()
    torch.testing.assert_close(a1.grad, b1.grad, rtol=0, atol=1e-12)


def test_backward_after_a_random_forward_is_refused():
    lua = LuaModule(nn.Dropout(0.5))
    x = torch.ones(50, dtype=D, requires_grad=True)
    y = lua(x)
    lua(x)
    with pytest.raises(RuntimeError, match="gives another output"):
        y.sum().backward()


def test_bad_inputs_are_clear_errors():
    lua = LuaModule("nn.Linear(4, 3)")
    with pytest.raises(TypeError, match="input is torch.float32 but the module's tensors are torch.float64"):
        lua(torch.randn(2, 4))
    with pytest.raises(TypeError, match="torch tensors or nested lists/tuples of them, got str"):
        lua("x")
    with pytest.raises(TypeError, match="Lua nn module or its constructor string"):
        LuaModule(3)


def test_import_luabridge_does_not_import_torch():
    import subprocess
    import sys

    code = "import sys, luabridge, luabridge.nn; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_without_torch_the_import_error_says_how_to_install_it():
    import subprocess
    import sys

    code = ("import sys; sys.modules['torch'] = None\n"   # as if PyTorch were not installed
            "try:\n    import luabridge.torch\nexcept ImportError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert "pip install torch" in out
