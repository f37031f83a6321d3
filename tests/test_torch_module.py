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


# -- table inputs and outputs ------------------------------------------------------------------

def copied_linear(lua_linear, dtype=D) -> torch.nn.Linear:
    """A torch.nn.Linear holding a copy of a Lua nn.Linear's weights."""
    w = np.array(lua_linear.weight)
    ref = torch.nn.Linear(w.shape[1], w.shape[0]).to(dtype)
    with torch.no_grad():
        ref.weight.copy_(torch.from_numpy(w))
        ref.bias.copy_(torch.from_numpy(np.array(lua_linear.bias)))
    return ref


def test_concat_table_returns_a_list_and_backpropagates_both_outputs():
    a, b = nn.Linear(4, 3), nn.Linear(4, 2)
    lua = LuaModule(nn.ConcatTable().add(a).add(b))
    ra, rb = copied_linear(a), copied_linear(b)
    x = torch.randn(5, 4, dtype=D)
    xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
    ya = lua(xa)
    assert isinstance(ya, list) and len(ya) == 2
    yb = [ra(xb), rb(xb)]
    for u, v in zip(ya, yb):
        torch.testing.assert_close(u, v, rtol=0, atol=1e-12)
    wa, wb = torch.randn(5, 3, dtype=D), torch.randn(5, 2, dtype=D)
    ((ya[0] * wa).sum() + (ya[1] * wb).sum()).backward()
    ((yb[0] * wa).sum() + (yb[1] * wb).sum()).backward()
    torch.testing.assert_close(xa.grad, xb.grad, rtol=0, atol=1e-12)
    torch.testing.assert_close(lua.get_parameter("1.weight").grad, ra.weight.grad, rtol=0, atol=1e-12)
    torch.testing.assert_close(lua.get_parameter("2.bias").grad, rb.bias.grad, rtol=0, atol=1e-12)


def test_parallel_table_and_cadd_table_take_a_list():
    a, b = nn.Linear(4, 3), nn.Linear(2, 3)
    lua = LuaModule(nn.Sequential().add(nn.ParallelTable().add(a).add(b)).add(nn.CAddTable()))
    assert [n for n, _ in lua.named_parameters()] == ["1.1.weight", "1.1.bias", "1.2.weight", "1.2.bias"]
    ra, rb = copied_linear(a), copied_linear(b)
    x1, x2 = torch.randn(6, 4, dtype=D), torch.randn(6, 2, dtype=D)
    torch.testing.assert_close(lua((x1, x2)), ra(x1) + rb(x2), rtol=0, atol=1e-12)
    assert torch.autograd.gradcheck(lambda u, v: lua([u, v]), (x1.requires_grad_(), x2.requires_grad_()))


def test_split_table_outputs_without_gradient_get_zeros():
    lua = LuaModule("nn.SplitTable(2)")
    x = torch.randn(4, 3, dtype=D, requires_grad=True)
    parts = lua(x)
    assert len(parts) == 3
    for k in range(3):
        torch.testing.assert_close(parts[k], x[:, k].detach(), rtol=0, atol=0)
    (parts[1] * 2).sum().backward()       # parts 0 and 2 receive no gradient: zeros go to Lua
    expected = torch.zeros(4, 3, dtype=D)
    expected[:, 1] = 2
    torch.testing.assert_close(x.grad, expected, rtol=0, atol=0)


def test_join_table_gradcheck_and_nested_outputs():
    join = LuaModule("nn.JoinTable(2)")
    a, b = torch.randn(3, 2, dtype=D, requires_grad=True), torch.randn(3, 4, dtype=D, requires_grad=True)
    torch.testing.assert_close(join([a, b]), torch.cat([a, b], 1).detach(), rtol=0, atol=0)
    assert torch.autograd.gradcheck(lambda u, v: join((u, v)), (a, b))
    nested = LuaModule("nn.ConcatTable():add(nn.Identity()):add(nn.ConcatTable():add(nn.Tanh()):add(nn.Sigmoid()))")
    x = torch.randn(2, 3, dtype=D, requires_grad=True)
    same, (t, s) = nested(x)
    torch.testing.assert_close(same, x.detach(), rtol=0, atol=0)
    torch.testing.assert_close(t, x.detach().tanh(), rtol=0, atol=1e-15)
    torch.testing.assert_close(s, x.detach().sigmoid(), rtol=0, atol=1e-15)
    assert torch.autograd.gradcheck(lambda v: torch.cat([o.reshape(-1) for o in _leaves(nested(v))]), (x,))


def _leaves(value):
    return [value] if isinstance(value, torch.Tensor) else [t for v in value for t in _leaves(v)]


# -- buffers and state_dict --------------------------------------------------------------------

def bn_net() -> tuple[LuaModule, torch.nn.Sequential]:
    """Linear -> BatchNormalization -> Tanh in Lua and its PyTorch twin, weights copied."""
    linear = nn.Linear(4, 3)
    lua = LuaModule(nn.Sequential().add(linear).add(nn.BatchNormalization(3)).add(nn.Tanh()))
    ref = torch.nn.Sequential(copied_linear(linear), torch.nn.BatchNorm1d(3, eps=1e-5, momentum=0.1), torch.nn.Tanh()).to(D)
    with torch.no_grad():
        lua.get_parameter("2.weight").uniform_(0.5, 1.5)
        lua.get_parameter("2.bias").uniform_(-0.5, 0.5)
        ref[1].weight.copy_(lua.get_parameter("2.weight"))
        ref[1].bias.copy_(lua.get_parameter("2.bias"))
    return lua, ref


def test_batch_norm_running_statistics_are_shared_buffers():
    lua, ref = bn_net()
    assert [n for n, _ in lua.named_buffers()] == ["2.running_mean", "2.running_var"]
    assert list(lua.state_dict()) == ["1.weight", "1.bias", "2.weight", "2.bias", "2.running_mean", "2.running_var"]
    bn = lua.lua.modules[1]
    assert lua.get_buffer("2.running_var").data_ptr() == bn.running_var.numpy().ctypes.data
    for _ in range(3):   # training: batch statistics, running ones updated (unbiased variance)
        x = torch.randn(8, 4, dtype=D)
        torch.testing.assert_close(lua(x), ref(x), rtol=0, atol=1e-12)
    torch.testing.assert_close(lua.get_buffer("2.running_mean"), ref[1].running_mean, rtol=0, atol=1e-12)
    torch.testing.assert_close(lua.get_buffer("2.running_var"), ref[1].running_var, rtol=0, atol=1e-12)
    lua.eval(), ref.eval()
    x = torch.randn(5, 4, dtype=D)
    torch.testing.assert_close(lua(x), ref(x), rtol=0, atol=1e-12)


def test_load_state_dict_writes_into_the_lua_tensors():
    lua, ref = bn_net()
    for _ in range(2):
        ref(torch.randn(8, 4, dtype=D))           # running statistics that differ from lua's
    ptrs = [t.data_ptr() for t in lua.state_dict().values()]
    theirs = [v for k, v in ref.state_dict().items() if k != "1.num_batches_tracked"]
    lua.load_state_dict(dict(zip(lua.state_dict(), theirs)))
    assert [t.data_ptr() for t in lua.state_dict().values()] == ptrs   # still the Lua memory
    bn = lua.lua.modules[1]
    np.testing.assert_array_equal(np.asarray(bn.running_var), ref[1].running_var.numpy())
    np.testing.assert_array_equal(np.asarray(lua.lua.modules[0].weight), ref[0].weight.detach().numpy())
    lua.eval(), ref.eval()
    x = torch.randn(5, 4, dtype=D)
    torch.testing.assert_close(lua(x), ref(x), rtol=0, atol=1e-12)


def test_load_state_dict_with_assign_still_shares_the_lua_memory():
    lua, ref = bn_net()
    model = torch.nn.Sequential(lua)    # loaded through a parent, as a LuaModule inside a model loads
    ref(torch.randn(8, 4, dtype=D))
    theirs = {f"0.{k}": v.clone() for k, v in zip(lua.state_dict(), (v for k, v in ref.state_dict().items()
                                                                       if k != "1.num_batches_tracked"))}
    weight = lua.get_parameter("1.weight")
    model.load_state_dict(theirs, assign=True)
    linear, bn = lua.lua.modules[0], lua.lua.modules[1]
    np.testing.assert_array_equal(np.asarray(linear.weight), ref[0].weight.detach().numpy())
    np.testing.assert_array_equal(np.asarray(bn.running_mean), ref[1].running_mean.numpy())
    assert lua.get_parameter("1.weight").data_ptr() == linear.weight.numpy().ctypes.data
    assert lua.get_buffer("2.running_mean").data_ptr() == bn.running_mean.numpy().ctypes.data
    assert weight is not lua.get_parameter("1.weight")   # assign=True: the loaded Parameter, on Lua memory


# -- dtype and device conversion ---------------------------------------------------------------

def test_float_and_double_convert_the_lua_module_and_rebind():
    lua, _ = bn_net()
    weight = lua.get_parameter("1.weight")
    before = weight.detach().clone()
    assert lua.float() is lua
    linear, bn = lua.lua.modules[0], lua.lua.modules[1]
    assert linear.weight._typename() == "torch.FloatTensor" and bn.running_var._typename() == "torch.FloatTensor"
    assert lua.get_parameter("1.weight") is weight and weight.dtype == torch.float32   # the same Parameter
    assert weight.data_ptr() == linear.weight.numpy().ctypes.data                      # over the new Lua tensor
    assert lua.get_buffer("2.running_mean").data_ptr() == bn.running_mean.numpy().ctypes.data
    torch.testing.assert_close(weight.detach(), before.float(), rtol=0, atol=0)
    x = torch.randn(6, 4)
    ref = copied_linear(linear, torch.float32)
    lua.eval()
    torch.testing.assert_close(lua.lua.modules[0].forward(x.numpy()).numpy(), ref(x).detach().numpy(), rtol=1e-6, atol=1e-6)
    with pytest.raises(TypeError, match="input is torch.float64 but the module's tensors are torch.float32"):
        lua(x.double())
    opt = torch.optim.SGD(lua.parameters(), lr=0.5)   # an optimizer made after the conversion
    lua.train()
    lua(x).sum().backward()
    grad = weight.grad.clone()
    opt.step()
    np.testing.assert_allclose(np.asarray(linear.weight), before.float().numpy() - 0.5 * grad.numpy(), rtol=1e-6)
    lua.to(torch.float64)
    assert linear.weight._typename() == "torch.DoubleTensor" and weight.dtype == D
    assert weight.grad.dtype == D
    lua.type(torch.float32)
    assert bn.running_var._typename() == "torch.FloatTensor"


def test_a_module_without_parameters_converts_too():
    tanh = LuaModule("nn.Tanh()").float()
    x = torch.randn(3, 2)
    y = tanh(x)
    assert y.dtype == torch.float32 and tanh.lua.output._typename() == "torch.FloatTensor"
    torch.testing.assert_close(y, x.tanh(), rtol=1e-6, atol=1e-6)


def test_other_devices_are_a_clear_error():
    lua = LuaModule("nn.Linear(2, 2)")
    for move in (lambda: lua.to("cuda"), lambda: lua.cuda(), lambda: lua.to(torch.device("meta"))):
        with pytest.raises(RuntimeError, match="runs on the CPU"):
            move()
    assert lua.to("cpu") is lua and lua.cpu() is lua
    parent = torch.nn.Sequential(lua, torch.nn.Linear(2, 2))
    for move in (lambda: parent.to("cuda"), lambda: parent.cuda()):   # reaching it through a parent
        with pytest.raises(RuntimeError, match="runs on the CPU"):
            move()


# -- inside PyTorch: optimizers, data loaders, containers, hooks -------------------------------

def train(model, batches, opt) -> list[float]:
    losses = []
    for x, y in batches:
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("make_opt", [
    lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=1e-3),
    lambda ps: torch.optim.Adam(ps, lr=0.01),
], ids=["sgd", "adam"])
def test_optimizer_steps_equal_pytorch_ones(make_opt):
    # no bias right before the batch norm: its gradient is rounding noise, which Adam would scale up
    a, b = nn.Linear(4, 5), nn.Linear(5, 3)
    lua = LuaModule(nn.Sequential().add(a).add(nn.Tanh()).add(nn.BatchNormalization(5)).add(b))
    ref = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.Tanh(), torch.nn.BatchNorm1d(5), torch.nn.Linear(5, 3)).to(D)
    with torch.no_grad():
        for p, q in zip(lua.parameters(), ref.parameters(), strict=True):
            q.copy_(p)
    batches = [(torch.randn(8, 4, dtype=D), torch.randn(8, 3, dtype=D)) for _ in range(4)]
    ours, theirs = train(lua, batches, make_opt(lua.parameters())), train(ref, batches, make_opt(ref.parameters()))
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-10)
    for (name, p), q in zip(lua.state_dict().items(), (v for k, v in ref.state_dict().items() if "num_batches" not in k)):
        torch.testing.assert_close(p, q, rtol=0, atol=1e-10, msg=name)


@pytest.mark.parametrize("workers", [0, 2])   # worker processes hand batches over in shared memory
def test_data_loader_batches_train_it(workers):
    lua, ref = mlp()
    data = torch.utils.data.TensorDataset(torch.randn(40, 4, dtype=D), torch.randn(40, 3, dtype=D))
    loader = torch.utils.data.DataLoader(data, batch_size=8, shuffle=False, num_workers=workers)
    ours = train(lua, loader, torch.optim.SGD(lua.parameters(), lr=0.05))
    theirs = train(ref, loader, torch.optim.SGD(ref.parameters(), lr=0.05))
    assert len(ours) == 5
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-10)


def test_between_native_layers_in_a_sequential():
    inner = nn.Sequential().add(nn.Tanh()).add(nn.Linear(5, 4))
    model = torch.nn.Sequential(torch.nn.Linear(3, 5), LuaModule(inner), torch.nn.ReLU(), torch.nn.Linear(4, 2)).to(D)
    ref = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.Tanh(), copied_linear(inner.modules[1]),
                              torch.nn.ReLU(), torch.nn.Linear(4, 2)).to(D)
    with torch.no_grad():
        for r, m in ((ref[0], model[0]), (ref[4], model[3])):
            r.weight.copy_(m.weight)
            r.bias.copy_(m.bias)
    x = torch.randn(7, 3, dtype=D)
    model(x).pow(2).sum().backward()
    ref(x).pow(2).sum().backward()
    torch.testing.assert_close(model[0].weight.grad, ref[0].weight.grad, rtol=0, atol=1e-12)   # native, below
    torch.testing.assert_close(model[1].get_parameter("2.weight").grad, ref[2].weight.grad, rtol=0, atol=1e-12)
    torch.testing.assert_close(model[3].bias.grad, ref[4].bias.grad, rtol=0, atol=1e-12)
    assert [n for n, _ in model.named_parameters()][2:4] == ["1.2.weight", "1.2.bias"]


def test_forward_and_full_backward_hooks():
    lua = LuaModule("nn.Linear(3, 2)")
    ref = copied_linear(lua.lua)
    seen = {}
    lua.register_forward_hook(lambda m, args, out: seen.update(out=out.detach().clone()))
    lua.register_full_backward_hook(lambda m, gin, gout: seen.update(gin=gin[0].clone(), gout=gout[0].clone()))
    x = torch.randn(4, 3, dtype=D, requires_grad=True)
    w = torch.randn(4, 2, dtype=D)
    (lua(x) * w).sum().backward()
    torch.testing.assert_close(seen["out"], ref(x).detach(), rtol=0, atol=1e-12)
    torch.testing.assert_close(seen["gout"], w, rtol=0, atol=0)
    torch.testing.assert_close(seen["gin"], w @ ref.weight.detach(), rtol=0, atol=1e-12)   # d/dx of (xW^T + b)·w


def test_zero_grad_and_parameters_that_need_no_gradient():
    lua, ref = mlp()
    x = torch.randn(3, 4, dtype=D)
    lua(x).sum().backward()
    lua.zero_grad()
    assert all(p.grad is None for p in lua.parameters())
    lua(x).sum().backward()
    ref(x).sum().backward()
    for p, q in zip(lua.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=0, atol=1e-12)
    lua.zero_grad()
    lua.requires_grad_(False)   # frozen: backward runs updateGradInput alone
    xg = x.clone().requires_grad_()
    lua(xg).sum().backward()
    assert all(p.grad is None for p in lua.parameters())
    xr = x.clone().requires_grad_()
    ref(xr).sum().backward()
    torch.testing.assert_close(xg.grad, xr.grad, rtol=0, atol=1e-12)


def test_shared_weights_are_one_parameter():
    linear = nn.Linear(3, 3)
    twin = linear.clone("weight", "bias", "gradWeight", "gradBias")
    lua = LuaModule(nn.Sequential().add(linear).add(nn.Tanh()).add(twin))
    assert [n for n, _ in lua.named_parameters()] == ["1.weight", "1.bias"]   # PyTorch lists a shared one once
    ref = copied_linear(linear)
    x = torch.randn(2, 3, dtype=D)
    lua(x).sum().backward()
    ref(ref(x).tanh()).sum().backward()
    torch.testing.assert_close(lua.get_parameter("1.weight").grad, ref.weight.grad, rtol=0, atol=1e-12)


def test_one_module_called_twice_in_a_graph():
    lua, ref = mlp()     # deterministic, so the earlier call's forward is run again for its backward
    a, b = torch.randn(3, 4, dtype=D), torch.randn(2, 4, dtype=D)
    (lua(a).sum() * 2 + lua(b).pow(2).sum()).backward()
    (ref(a).sum() * 2 + ref(b).pow(2).sum()).backward()
    for p, q in zip(lua.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=0, atol=1e-12)


def test_strided_and_empty_inputs_go_to_lua_as_they_are():
    tanh = LuaModule("nn.Tanh()")
    for x in (torch.randn(4, 6, dtype=D)[:, ::2], torch.randn(3, 5, dtype=D).t()):
        x.requires_grad_()
        y = tanh(x)
        y.sum().backward()
        torch.testing.assert_close(y, x.detach().tanh(), rtol=0, atol=1e-15)
        torch.testing.assert_close(x.grad, 1 - x.detach().tanh() ** 2, rtol=0, atol=1e-15)
    assert tanh(torch.empty(0, 3, dtype=D)).shape == (0, 3)


def test_inputs_lent_to_lua_are_given_back():
    from luabridge.core.runtime import bridge

    lua = LuaModule("nn.Linear(1024, 2)")    # allocates nothing per call: only the collector frees
    before = len(bridge().buffers)
    for _ in range(300):                     # 300 inputs of 512 KiB, past the collector's 64 MiB
        lua(torch.randn(64, 1024, dtype=D)).sum().backward()
    assert len(bridge().buffers) - before < 200   # without the count, all 300 stay registered


def test_the_same_input_again_sees_its_new_values():
    from luabridge.core.runtime import bridge

    tanh = LuaModule("nn.Tanh()")
    x = torch.randn(5, 3, dtype=D)
    torch.testing.assert_close(tanh(x), x.tanh(), rtol=0, atol=1e-15)
    registered = len(bridge().buffers)
    x.mul_(3)                                      # in place, through torch
    torch.testing.assert_close(tanh(x), x.tanh(), rtol=0, atol=1e-15)
    x.numpy()[1, 2] = 0.25                         # in place, behind torch's back
    assert tanh(x)[1, 2].item() == np.tanh(0.25)
    assert len(bridge().buffers) == registered     # lent again: no buffer registered for it
    nan = np.array([0x7FF8DEADBEEF0001], dtype=np.uint64).view(np.float64)[0]   # a NaN with a payload
    x.numpy()[0, 0] = nan
    y = tanh(x)
    assert torch.isnan(y[0, 0])
    torch.testing.assert_close(y[1:], x[1:].tanh(), rtol=0, atol=1e-15)
    assert x.numpy().view(np.uint64)[0, 0] == np.array(np.nan).view(np.uint64)   # made canonical first


def test_other_tensors_at_the_same_address_are_lent_as_themselves():
    identity = LuaModule("nn.Identity()")          # no tensors of its own: any dtype goes
    base = torch.arange(24, dtype=D).reshape(4, 6)
    views = (base, base.t(), base.view(6, 4), base.view(-1), base[:, ::2], base.view(torch.int64),
             base.view(torch.float32), base)
    assert len({v.data_ptr() for v in views}) == 1
    for v in views:
        y = identity(v)
        assert y.dtype == v.dtype and torch.equal(y, v)


def test_without_autograd_the_output_is_the_same_and_records_nothing():
    lua, ref = mlp()
    x = torch.randn(6, 4, dtype=D)
    with_grad = lua(x)
    with torch.no_grad():
        without = lua(x)
    assert with_grad.grad_fn is not None and without.grad_fn is None
    assert torch.equal(without, with_grad)
    lua.requires_grad_(False)                      # nothing needs a gradient: no autograd either
    frozen = lua(x)
    assert frozen.grad_fn is None and torch.equal(frozen, with_grad)
    lua.requires_grad_(True)
    torch.testing.assert_close(with_grad, ref(x), rtol=0, atol=1e-12)


def test_a_forward_without_autograd_before_a_backward_is_undone():
    lua, ref = mlp()
    x1 = torch.randn(3, 4, dtype=D, requires_grad=True)
    y1 = lua(x1)
    with torch.no_grad():
        lua(torch.randn(5, 4, dtype=D))            # the Lua module now holds another call's state
    y1.sum().backward()
    r1 = x1.detach().clone().requires_grad_()
    ref(r1).sum().backward()
    torch.testing.assert_close(x1.grad, r1.grad, rtol=0, atol=1e-12)


def test_deepcopy_pickle_and_torch_save_copy_the_lua_module():
    import copy
    import io
    import pickle

    lua, ref = bn_net()
    x = torch.randn(6, 4, dtype=D)
    lua(x), ref(x)
    lua.eval(), ref.eval()
    buffer = io.BytesIO()
    torch.save(torch.nn.Sequential(lua), buffer)   # a whole model, pickled
    buffer.seek(0)
    copies = [copy.deepcopy(lua), pickle.loads(pickle.dumps(lua)), torch.load(buffer, weights_only=False)[0]]
    for twin in copies:
        assert isinstance(twin, LuaModule) and not twin.training
        torch.testing.assert_close(twin(x), ref(x), rtol=0, atol=1e-12)
        with torch.no_grad():
            twin.get_parameter("1.weight").zero_()   # its own memory: the original is untouched
        torch.testing.assert_close(lua(x), ref(x), rtol=0, atol=1e-12)


def test_lookup_table_takes_integer_indices():
    lua = LuaModule("nn.LookupTable(10, 3)")
    emb = torch.nn.Embedding(10, 3).to(D)
    with torch.no_grad():
        emb.weight.copy_(lua.weight)
    idx = torch.tensor([[1, 2, 10], [4, 4, 1]])   # int64: a LongTensor of torch7's 1-based indices
    w = torch.randn(2, 3, 3, dtype=D)
    y = lua(idx)
    torch.testing.assert_close(y, emb(idx - 1), rtol=0, atol=0)
    (y * w).sum().backward()
    (emb(idx - 1) * w).sum().backward()
    torch.testing.assert_close(lua.weight.grad, emb.weight.grad, rtol=0, atol=1e-12)   # index 4 twice: summed
