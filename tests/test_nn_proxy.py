"""luabridge.nn / luabridge.optim and the proxies: classes by name, numpy in and out without a
copy, fields, chaining, printing, Lua tables as lists and dicts, Python callbacks for optim."""
import threading

import numpy as np
import pytest

import luabridge
from luabridge import nn, optim


def linear_ref(m, x):
    return x @ np.asarray(m.weight).T + np.asarray(m.bias)


def test_class_by_name_forward_backward_against_numpy(rng):
    m = nn.Linear(5, 3)
    x, g = rng.standard_normal((4, 5)), rng.standard_normal((4, 3))
    out = m.forward(x)
    assert isinstance(out, luabridge.Tensor) and out.shape == (4, 3) and out.dtype == np.float64
    np.testing.assert_allclose(np.asarray(out), linear_ref(m, x), rtol=1e-12)
    grad_in = m.backward(x, g)
    np.testing.assert_allclose(np.asarray(grad_in), g @ np.asarray(m.weight), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(m.gradWeight), g.T @ x, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(m.gradBias), g.sum(0), rtol=1e-12)


def test_output_is_the_module_buffer_reused_by_the_next_call(rng):
    m = nn.Linear(3, 2)
    x1, x2 = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    out1 = m.forward(x1)
    assert np.shares_memory(np.asarray(out1), np.asarray(m.output))
    kept = np.array(out1)
    m.forward(x2)
    np.testing.assert_allclose(np.asarray(out1), linear_ref(m, x2), rtol=1e-12)  # overwritten
    np.testing.assert_allclose(kept, linear_ref(m, x1), rtol=1e-12)


def test_numpy_inputs_and_fields_share_memory(rng):
    x = rng.standard_normal((3, 4))
    want = np.maximum(x, 0)
    nn.ReLU(True).forward(x)  # in place: writes the caller's array
    np.testing.assert_array_equal(x, want)
    m = nn.Linear(4, 2)
    np.asarray(m.weight)[:] = 0  # numpy writes reach the Lua parameters
    m.bias.fill(3)
    np.testing.assert_array_equal(np.asarray(m.forward(rng.standard_normal(4))), [3, 3])


def test_float32_arrays_make_float_tensors(rng):
    m = nn.Linear(4, 2).float()
    assert isinstance(m, luabridge.LuaObject) and m.weight.dtype == np.float32
    x = rng.standard_normal((3, 4)).astype(np.float32)
    out = m.forward(x)
    assert out.dtype == np.float32
    np.testing.assert_allclose(np.asarray(out), linear_ref(m, x.astype(np.float64)), rtol=1e-5)


def test_chaining_returns_the_same_proxy_and_printing_is_torch7s():
    seq = nn.Sequential()
    assert seq.add(nn.Linear(2, 3)).add(nn.Tanh()) is seq
    assert str(nn.Linear(3, 2)) == "nn.Linear(3 -> 2)"
    text = str(seq)
    assert text.startswith("nn.Sequential") and "(1): nn.Linear(2 -> 3)" in text and "(2): nn.Tanh" in text
    mods = seq.modules
    assert isinstance(mods, list) and [str(m) for m in mods] == ["nn.Linear(2 -> 3)", "nn.Tanh"]


def test_call_is_the_module_call(rng):
    m = nn.Linear(3, 2)
    x, g = rng.standard_normal((2, 3)), rng.standard_normal((2, 2))
    np.testing.assert_allclose(np.asarray(m(x)), linear_ref(m, x), rtol=1e-12)
    out, grad_in = m(x, g)
    np.testing.assert_allclose(np.asarray(grad_in), g @ np.asarray(m.weight), rtol=1e-12)


def test_tables_become_lists_and_dicts(rng):
    m = nn.Linear(3, 2)
    params, grads = m.parameters()
    assert [p.shape for p in params] == [(2, 3), (2,)] and [g.shape for g in grads] == [(2, 3), (2,)]
    assert np.shares_memory(np.asarray(params[0]), np.asarray(m.weight))
    f = luabridge.wrap(luabridge.eval(
        "function(ts) local s = 0 for _, t in ipairs(ts) do s = s + t:sum() end "
        "return s, #ts, {a = 1, b = {2, 3}, [5] = 'x'}, {} end"))
    a, b = rng.standard_normal((2, 2)), rng.standard_normal(3)
    total, n, keyed, empty = f([a, (b,)[0]])
    assert total == pytest.approx(a.sum() + b.sum(), rel=1e-12) and n == 2
    assert keyed == {"a": 1, "b": [2, 3], 5: "x"} and empty == []


def test_tables_of_tensors_in_and_out_of_containers(rng):
    x, y = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    split = nn.ConcatTable().add(nn.Identity()).add(nn.Tanh())
    a, b = split.forward(x)  # a Lua table of tensors: a list of proxies
    np.testing.assert_array_equal(np.asarray(a), x)
    np.testing.assert_allclose(np.asarray(b), np.tanh(x), rtol=1e-12)
    par = nn.ParallelTable().add(nn.Tanh()).add(nn.Square())
    outs = par.forward([x, y])  # a Python list of arrays: a Lua table of shared tensors
    np.testing.assert_allclose(np.asarray(outs[0]), np.tanh(x), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(outs[1]), y * y, rtol=1e-12)
    gx, gy = par.backward((x, y), (np.ones_like(x), np.full_like(y, 2.0)))
    np.testing.assert_allclose(np.asarray(gx), 1 - np.tanh(x) ** 2, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(gy), 4 * y, rtol=1e-12)


def test_optim_sgd_with_a_python_feval_against_numpy(rng):
    c = rng.standard_normal(6)
    x = np.zeros(6)
    calls = []

    def feval(p):
        assert isinstance(p, luabridge.Tensor) and np.shares_memory(np.asarray(p), x)
        calls.append(1)
        d = np.asarray(p) - c
        return np.float64(0.5 * d @ d), d.copy()  # a numpy scalar and a numpy gradient

    config, state = {"learningRate": 0.1, "momentum": 0.9}, {}
    ref, v = np.zeros(6), None
    for step in range(5):
        result, losses = optim.sgd(feval, x, config, state)
        g = ref - c
        v = g if v is None else 0.9 * v + 0.1 * g  # torch7: dampening defaults to momentum
        want_loss = 0.5 * g @ g
        ref = ref - 0.1 * v
        assert isinstance(losses, list) and losses[0] == pytest.approx(want_loss, rel=1e-12)
        assert np.shares_memory(np.asarray(result), x)
    np.testing.assert_allclose(x, ref, rtol=1e-12)
    assert len(calls) == 5 and state["evalCounter"] == 5
    np.testing.assert_allclose(np.asarray(state["dfdx"]), v, rtol=1e-12)  # momentum kept in the dict


def test_optim_adam_feval_returning_a_proxy_gradient(rng):
    m = nn.Linear(3, 1)
    crit = nn.MSECriterion()
    x = rng.standard_normal((32, 3))
    y = x @ np.array([[1.0], [-2.0], [0.5]]) + 0.25
    params, grads = m.getParameters()

    def feval(_):
        grads.zero()
        loss = crit.forward(m.forward(x), y)
        m.backward(x, crit.backward(m.output, y))
        return loss, grads

    config = {"learningRate": 0.05}
    first = feval(params)[0]
    for _ in range(300):
        optim.adam(feval, params, config)
    assert feval(params)[0] < 1e-3 * first
    np.testing.assert_allclose(np.asarray(m.weight), [[1.0, -2.0, 0.5]], atol=1e-2)
    assert config["t"] == 300


def test_python_errors_in_callbacks_propagate():
    def feval(_):
        raise ValueError("feval failed")

    with pytest.raises(ValueError, match="feval failed"):
        optim.sgd(feval, np.zeros(2), {"learningRate": 0.1})


def test_lua_errors_and_unknown_names():
    with pytest.raises(luabridge.LuaError):
        nn.Linear(3, 2).forward(np.zeros((2, 5)))
    with pytest.raises(AttributeError, match="NoSuchLayer"):
        nn.NoSuchLayer
    with pytest.raises(AttributeError, match="noSuchField"):
        nn.Linear(3, 2).noSuchField
    assert "Linear" in dir(nn) and "sgd" in dir(optim)


def test_lua_functions_come_back_callable():
    double = luabridge.wrap(luabridge.eval("function(a) return {a * 2, a} end"))
    assert isinstance(double, luabridge.LuaObject) and double(3) == [6, 3]
    luabridge.require("nn")
    linear = luabridge.wrap(luabridge.eval("nn.Linear"))  # a class constructor: callable
    assert str(linear(3, 2)) == "nn.Linear(3 -> 2)"


def test_each_thread_uses_its_own_runtime(rng):
    x = rng.standard_normal((2, 3))
    results = []

    def work():
        m = nn.Linear(3, 2)
        results.append((np.array(m.forward(x)), linear_ref(m, x)))

    t = threading.Thread(target=work)
    t.start()
    t.join()
    np.testing.assert_allclose(*results[0], rtol=1e-12)
