"""Mixed graphs: Lua modules as nodes (lua_module) and Python functions as ops (python_op)."""
from __future__ import annotations

import numpy as np
import pytest

import luabridge
from luabridge.graph import Session, create, gradients, lua_module, python_op
from luabridge.graph.executor import GraphError

from graph_test_ops import placeholder, register_all

register_all()


def test_lua_module_from_constructor_string_matches_the_module(rng):
    x = placeholder("x", dtype="float32")
    y = lua_module(x, "nn.Linear(4,3)", name="lin")
    assert y.list_input_names() == ["lin_weight", "lin_bias"]
    a = rng.standard_normal((5, 4)).astype(np.float32)
    s = Session()
    out = s.run(y, {x: a})
    W, b = s.variable("lin_weight"), s.variable("lin_bias")  # initialised from the module's reset
    assert W.shape == (3, 4) and np.abs(W).max() <= 0.5 + 1e-6 and np.abs(W).max() > 0
    np.testing.assert_allclose(out, a.astype(np.float64) @ W.T + b, rtol=1e-5, atol=1e-6)


def test_lua_module_object_and_user_file(tmp_path, rng):
    luabridge.require("nn")
    seq = luabridge.eval("nn.Sequential():add(nn.Linear(3,4)):add(nn.Tanh()):add(nn.Linear(4,2))")
    x = placeholder("x", dtype="float32")
    y = lua_module(x, seq, name="mlp")
    assert y.list_input_names() == [f"mlp_param{i}" for i in range(1, 5)]
    f = tmp_path / "model.lua"
    f.write_text("require 'nn'\nlocal m = nn.Sequential():add(nn.Linear(2,2))\nm.modules[1].weight:fill(1)\n"
                 "m.modules[1].bias:fill(0.5)\nreturn m\n")
    z = lua_module(y, luabridge.dofile(str(f)), name="user")
    a = rng.standard_normal((6, 3)).astype(np.float32)
    s = Session()
    out = s.run(z, {x: a})
    v = {k: s.variable(k).astype(np.float64) for k in z.list_input_names()}
    h = np.tanh(a @ v["mlp_param1"].T + v["mlp_param2"]) @ v["mlp_param3"].T + v["mlp_param4"]
    np.testing.assert_allclose(out, h @ np.ones((2, 2)) + 0.5, rtol=1e-5, atol=1e-5)


def test_python_op_values_and_gradient(rng):
    x = placeholder("x")
    cube = python_op(lambda a: a ** 3, grad=lambda ins, outs, g: [3 * ins[0] ** 2 * g[0]], name="cube")
    y = cube(x)
    pair = python_op(lambda a, b: (a + b, a * b), num_outputs=2,
                     infer_shape=lambda sa, sb: [sa, sa], name="pair")
    p = pair(y, x)
    gx, = gradients(y, [x])
    a = rng.standard_normal((2, 3))
    s = Session()
    ry, rs, rp, rg = s.run([y, p[0], p[1], gx], {x: a})
    np.testing.assert_allclose(ry, a ** 3, rtol=1e-12)
    np.testing.assert_allclose(rs, a ** 3 + a, rtol=1e-12)
    np.testing.assert_allclose(rp, a ** 4, rtol=1e-12)
    np.testing.assert_allclose(rg, 3 * a ** 2, rtol=1e-12)


def test_mixed_graph_trains(rng):
    """A Lua module, a Python op and an nn criterion in one graph, trained by gradient descent."""
    x, t = placeholder("x"), placeholder("t")
    h = lua_module(x, "nn.Linear(3,1)", name="m", dtype="float64")
    relu = python_op(lambda a: np.maximum(a, 0) + 0.1 * a,
                     grad=lambda ins, outs, g: [np.where(ins[0] > 0, 1.1, 0.1) * g[0]], name="leaky")
    loss = lua_module([relu(h), t], "nn.MSECriterion()", name="mse", dtype="float64")
    params = loss.list_input_variables()
    grads = gradients(loss, params)
    a = rng.standard_normal((32, 3))
    target = np.maximum(a @ np.array([[1.0], [-2.0], [0.5]]), 0)
    s = Session(poison=True)
    losses = []
    for _ in range(60):
        res = s.run([loss] + grads, {x: a, t: target})
        losses.append(float(res[0][0]))
        for p, g in zip(params, res[1:]):
            s.assign(p, s.variable(p) - 0.3 * g)
    assert losses[-1] < 0.1 * losses[0]


def test_lua_module_gradients_match_finite_differences(rng):
    """Parameter and input gradients through lua_module nodes (a Linear and an MSE criterion
    around a Python op) against central differences of the same loss written in numpy."""
    x, t = placeholder("x"), placeholder("t")
    h = lua_module(x, "nn.Linear(3,2)", name="fd", dtype="float64")
    leaky = python_op(lambda a: np.maximum(a, 0) + 0.1 * a,
                      grad=lambda ins, outs, g: [np.where(ins[0] > 0, 1.1, 0.1) * g[0]], name="leaky_fd")
    loss = lua_module([leaky(h), t], "nn.MSECriterion()", name="mse_fd", dtype="float64")
    params = loss.list_input_variables()
    a, target = rng.standard_normal((5, 3)), rng.standard_normal((5, 2))
    s = Session()
    res = s.run([loss] + gradients(loss, params + [x]), {x: a, t: target})
    W, b = s.variable("fd_weight"), s.variable("fd_bias")

    def numpy_loss(W, b, a):
        z = a @ W.T + b
        return np.mean((np.maximum(z, 0) + 0.1 * z - target) ** 2)

    assert np.isclose(res[0][0], numpy_loss(W, b, a), rtol=1e-12)
    for got, which in zip(res[1:], range(3)):
        args = [W.copy(), b.copy(), a.copy()]
        numeric = np.zeros_like(args[which])
        for i in np.ndindex(numeric.shape):
            up, down = [v.copy() for v in args], [v.copy() for v in args]
            up[which][i] += 1e-6
            down[which][i] -= 1e-6
            numeric[i] = (numpy_loss(*up) - numpy_loss(*down)) / 2e-6
        np.testing.assert_allclose(got, numeric, rtol=1e-6, atol=1e-8)


def test_python_op_error_names_the_node():
    x = placeholder("x")
    bad = python_op(lambda a: a[:2], name="shrink")  # wrong output size
    s = Session()
    with pytest.raises(GraphError, match=r"node 'oops'"):
        s.run(bad(x, name="oops"), {x: np.ones(3)})


def test_gpu_session_matches_cpu(numpy_device, rng):
    """config "gpu": buffers, variables and nn modules on the CUDA backend (numpy standing in)."""
    x, t = placeholder("x", dtype="float32"), placeholder("t", dtype="float32")
    h = lua_module(x, "nn.Linear(3,2)", name="g")
    sq = python_op(lambda a: a * a, grad=lambda ins, outs, g: [2 * ins[0] * g[0]], name="sq")
    loss = create("t_sum", create("t_mul", create("t_exp", sq(h)), create("t_tanh", t)))
    grads = gradients(loss, loss.list_input_variables() + [x])
    a = rng.standard_normal((4, 3)).astype(np.float32)
    tt = rng.standard_normal((4, 2)).astype(np.float32)
    cpu = Session("cpu").run([loss] + grads, {x: a, t: tt})
    s = Session("gpu", poison=True)
    assert s.device.name == "cuda"
    gpu = s.run([loss] + grads, {x: a, t: tt})
    assert luabridge.eval("torch.type")(s._states["g_weight"].tensor) == "torch.CudaTensor"
    for c, g in zip(cpu, gpu):
        assert isinstance(g, np.ndarray)
        np.testing.assert_allclose(g, c, rtol=1e-5, atol=1e-6)


def test_gpu_session_without_a_device_says_what_is_missing(monkeypatch):
    from luabridge.providers.torch_cuda import arrays as cuda
    cuda.use_array_module(None)
    monkeypatch.delenv(cuda.ENV_VAR, raising=False)
    try:
        cuda.array_module()
    except RuntimeError:
        with pytest.raises(RuntimeError, match=r"Session\('gpu'\): no CUDA device"):
            Session("gpu")
    else:
        pytest.skip("a CUDA device is present")
