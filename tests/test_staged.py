"""Staged closures (luabridge.graph.compile): outputs, gradients and gradients of gradients
against numpy float64 references and central finite differences; stage errors; captured state."""
from __future__ import annotations

import gc

import numpy as np
import pytest

import luabridge.graph as G
from luabridge.graph import StageError, create, lua_module, python_op

EPS = 1e-6


def ph(name: str, shape=None):
    return create("placeholder", name=name, dtype="float64", **({"shape": shape} if shape else {}))


def dot(a, b) -> float:
    return float(sum(np.vdot(np.asarray(x, np.float64), np.asarray(y, np.float64)) for x, y in zip(a, b)))


def numeric_grad(phi, xs):
    """Central differences of the scalar phi(xs) by every element of every x."""
    out = []
    for j, x in enumerate(xs):
        g = np.zeros_like(x)
        for i in np.ndindex(x.shape):
            up, down = [a.copy() for a in xs], [a.copy() for a in xs]
            up[j][i] += EPS
            down[j][i] -= EPS
            g[i] = (phi(up) - phi(down)) / (2 * EPS)
        out.append(g)
    return out


def check_two_stages(outputs, inputs, values, reference, rng, tol=1e-6):
    """Stage 0 against the numpy reference; stage 1 against central differences of <G, f(x)>;
    stage 2 against central differences of <V, grads(x, G)> by x and by G."""
    f = G.compile(outputs, inputs, stages=2)
    outs, back = f(*values)
    for o, r in zip(outs, reference(*values)):
        np.testing.assert_allclose(o, r, rtol=1e-12, atol=1e-12)
    G_ = [rng.standard_normal(o.shape) for o in outs]
    grads, back2 = back(*G_)
    expected = numeric_grad(lambda xs: dot(G_, reference(*xs)), values)
    for g, e in zip(grads, expected):
        np.testing.assert_allclose(g, e, rtol=tol, atol=tol)
    V = [rng.standard_normal(v.shape) for v in values]
    second, last = back2(*V)
    assert last is None and len(second) == len(values) + len(outs)

    def phi(xs_and_gs):
        xs, gs = xs_and_gs[:len(values)], xs_and_gs[len(values):]
        _, b = f(*xs)
        return dot(V, b(*gs)[0])
    expected2 = numeric_grad(phi, list(values) + G_)
    for g, e in zip(second, expected2):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)
    return f


# ---- ops: first and second derivatives ----

def test_elementwise_ops(rng):
    x, y = ph("x"), ph("y")
    s = ph("s")   # a (1,) operand broadcasts
    out = [x * y + s * x, x / (y * y + 1.5) - s, create("exp", x * 0.5) + create("log", y * y + 1) * 2,
           create("sqrt", x * x + 1) ** 3 - 2 / (y * y + 1), (x * x + 1) ** (s + 1.5), 3 - (2 ** x) * 0.25]
    a, b, c = rng.standard_normal((2, 3)), rng.standard_normal((2, 3)), rng.standard_normal(1)

    def ref(a, b, c):
        return [a * b + c * a, a / (b * b + 1.5) - c, np.exp(0.5 * a) + 2 * np.log(b * b + 1),
                np.sqrt(a * a + 1) ** 3 - 2 / (b * b + 1), (a * a + 1) ** (c + 1.5), 3 - 2 ** a * 0.25]
    check_two_stages(out, [x, y, s], [a, b, c], ref, rng)


@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_matmul_with_transposes(rng, ta, tb):
    x, w = ph("x"), ph("w")
    out = create("matmul", x, w, transpose_a=ta, transpose_b=tb)
    a = rng.standard_normal((4, 3) if ta else (3, 4))
    b = rng.standard_normal((2, 4) if tb else (4, 2))

    def ref(a, b):
        return [(a.T if ta else a) @ (b.T if tb else b)]
    check_two_stages([out * out], [x, w], [a, b], lambda a, b: [ref(a, b)[0] ** 2], rng)


def test_reductions(rng):
    x = ph("x")
    cube = x * x * x
    out = [create("reduce_sum", cube, reduction_indices=[1]), create("reduce_mean", cube),
           create("reduce_mean", x * x, reduction_indices=[-2])]
    a = rng.standard_normal((3, 4))

    def ref(a):
        return [(a ** 3).sum(axis=1), np.array([(a ** 3).mean()]), (a * a).mean(axis=0)]
    check_two_stages(out, [x], [a], ref, rng)


def test_flatten(rng):
    x = ph("x")
    flat = create("flatten_layer", x * x)
    out = create("matmul", flat, create("flatten_layer", x), transpose_b=True)
    a = rng.standard_normal((2, 3, 2))
    check_two_stages([out], [x], [a], lambda a: [(a * a).reshape(2, 6) @ a.reshape(2, 6).T], rng)


def _softmax(a):
    e = np.exp(a - a.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("act", ["softmax", "tanh", "relu"])
def test_activations(rng, act):
    x, c = ph("x"), ph("c")
    out = create("reduce_sum", create(act, x) * create(act, x) * c)
    a = rng.standard_normal((3, 5))
    a[np.abs(a) < 0.05] = 0.5    # relu: no finite difference across the kink
    k = rng.standard_normal((3, 5))
    fn = {"softmax": _softmax, "tanh": np.tanh, "relu": lambda v: np.maximum(v, 0)}[act]
    check_two_stages([out], [x, c], [a, k], lambda a, k: [np.array([(fn(a) ** 2 * k).sum()])], rng)


def test_tanh_second_derivative_by_hand(rng):
    x = ph("x")
    f = G.compile(create("reduce_sum", create("tanh", x)), [x], stages=2)
    a, v = rng.standard_normal(6), rng.standard_normal(6)
    _, back = f(a)
    (g,), back2 = back(1.0)
    t = np.tanh(a)
    np.testing.assert_allclose(g, 1 - t * t, rtol=1e-13)
    (gx, gseed), _ = back2(v)
    np.testing.assert_allclose(gx, v * -2 * t * (1 - t * t), rtol=1e-12)   # d2/dx2 tanh = -2 t (1 - t^2)
    np.testing.assert_allclose(gseed, [np.dot(v, 1 - t * t)], rtol=1e-12)


@pytest.mark.parametrize("bias", [True, False])
def test_linear(rng, bias):
    x, w, b = ph("x"), ph("w"), ph("b")
    h = create("linear", x, w, *([b] if bias else []), no_bias=not bias)
    out = create("tanh", h) * h
    a, W, B = rng.standard_normal((4, 3)), rng.standard_normal((2, 3)), rng.standard_normal(2)

    def ref(a, W, *B):
        z = a @ W.T + (B[0] if B else 0)
        return [np.tanh(z) * z]
    check_two_stages([out], [x, w, b] if bias else [x, w], [a, W, B] if bias else [a, W], ref, rng)


# ---- stages, counts, errors ----

def test_last_stage_returns_none_and_closures_are_single_use(rng):
    x = ph("x")
    y = x * x
    outs, back = G.compile(y, [x], stages=0)(np.arange(3.0))
    assert back is None and np.array_equal(outs[0], [0, 1, 4])
    f = G.compile(y, [x])
    outs, back = f(np.arange(3.0))
    grads, back2 = back(np.ones(3))
    assert back2 is None and np.array_equal(grads[0], [0, 2, 4])
    with pytest.raises(StageError, match="compiled for 1 stages"):
        back(np.ones(3))
    _, back = f(np.arange(3.0))
    again = [back(np.full(3, 2.0), retain_graph=True)[0][0] for _ in range(2)]
    assert np.array_equal(again[0], [0, 4, 8]) and np.array_equal(again[1], again[0])
    back(np.ones(3))
    with pytest.raises(StageError, match="called twice"):
        back(np.ones(3))


def test_counts_and_shapes_are_checked():
    x, w = ph("x"), ph("w")
    f = G.compile([x * w, x + w], [x, w])
    with pytest.raises(ValueError, match=r"takes 2 input\(s\) \(x_output, w_output\), got 1"):
        f(np.ones(2))
    _, back = f(np.ones(2), np.ones(2))
    with pytest.raises(ValueError, match=r"takes 2 gradient\(s\).*got 3"):
        back(np.ones(2), np.ones(2), np.ones(2))
    with pytest.raises(ValueError, match=r"gradient 1 has shape \(3,\), the result it belongs to \(2,\)"):
        back(np.ones(2), np.ones(3))
    with pytest.raises(ValueError, match="stages must be an int >= 0"):
        G.compile(x, [x], stages=-1)
    with pytest.raises(ValueError, match="is not a placeholder or a variable"):
        G.compile(x * w, [x * 2])
    with pytest.raises(ValueError, match="placeholder 'w' is read but is not among the inputs"):
        G.compile(x * w, [x])
    v = G.Variable("v")
    with pytest.raises(ValueError, match=r"op 'assign' \(node 'store'\) writes a variable"):
        G.compile(create("assign", v, x * 2, name="store"), [x])


def test_nn_node_without_second_derivative_is_named():
    x = ph("x")
    y = create("reduce_sum", create("max_pool", x, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], name="pool"))
    G.compile(y, [x], stages=1)
    with pytest.raises(ValueError, match=r"stages=2.*nn op 'max_pool' \(node 'pool'\) has no second derivative"):
        G.compile(y, [x], stages=2)
    z = lua_module(x, "nn.Sequential():add(nn.Tanh())", name="seq", dtype="float64")
    with pytest.raises(ValueError, match=r"node 'seq'\) has no second derivative"):
        G.compile(create("reduce_sum", z), [x], stages=2)


# ---- captured state ----

def test_two_forward_calls_have_independent_backs(rng):
    x = ph("x")
    seq = lua_module(x, "nn.Sequential():add(nn.Linear(3, 4)):add(nn.Tanh()):add(nn.Linear(4, 2))",
                     name="mlp", dtype="float64")
    f = G.compile(create("tanh", seq), [x])
    a, b = rng.standard_normal((5, 3)), rng.standard_normal((5, 3))
    g = rng.standard_normal((5, 2))
    _, back_a = f(a)
    _, back_b = f(b)
    grad_b = back_b(g)[0][0]     # the later forward's closure first
    grad_a = back_a(g)[0][0]
    w1, b1, w2, b2 = (f.session.variable(f"mlp_param{i}") for i in range(1, 5))

    def reference(v):
        h = np.tanh(v @ w1.T + b1)
        d = g * (1 - np.tanh(h @ w2.T + b2) ** 2)
        return ((d @ w2) * (1 - h * h)) @ w1
    np.testing.assert_allclose(grad_a, reference(a), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(grad_b, reference(b), rtol=1e-12, atol=1e-14)


def test_chains_are_reused_once_released(rng):
    x = ph("x")
    f = G.compile(create("tanh", x), [x], stages=2)
    for _ in range(3):
        _, back = f(rng.standard_normal(4))
        back(np.ones(4))
    _, held = f(rng.standard_normal(4))
    _, other = f(rng.standard_normal(4))
    plan, = f._plans.values()
    assert len(plan._chains) == 2
    del held, other
    gc.collect()
    assert all(c.holds == 0 for c in plan._chains)


def test_known_shapes_are_planned_at_compile_time(rng):
    x, w = ph("x", shape=[3, 4]), ph("w", shape=[4, 2])
    f = G.compile(create("reduce_sum", create("tanh", create("matmul", x, w))), [x, w], stages=2)
    plan, = f._plans.values()
    chain, = plan._chains
    executors = [chain.executors[s] for s in range(3)]
    assert all(ex.builds == 1 for ex in executors)
    report = executors[0].plan.graph.attrs["memory"]
    assert report.planned_bytes > 0
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))
    _, back = f(a, b)
    (ga, gb), back2 = back(1.0)
    back2(np.ones((3, 4)), np.ones((4, 2)))
    assert all(ex.builds == 1 for ex in executors) and plan._chains == [chain]
    t = np.tanh(a @ b)
    np.testing.assert_allclose(ga, (1 - t * t) @ b.T, rtol=1e-12, atol=1e-15)


def test_none_gradients_are_zeros_and_repeated_outputs_sum(rng):
    x, w = ph("x"), ph("w")
    p = x * w
    f = G.compile([p, x + w, p], [x, w])
    a, b = rng.standard_normal(3), rng.standard_normal(3)
    g1, g2 = rng.standard_normal(3), rng.standard_normal(3)
    _, back = f(a, b)
    (gx, gw), _ = back(g1, None, g2)
    np.testing.assert_allclose(gx, (g1 + g2) * b, rtol=1e-14)
    np.testing.assert_allclose(gw, (g1 + g2) * a, rtol=1e-14)
    _, back = G.compile([p, p], [x, w])(a, b)
    (gx, gw), _ = back(g1, g2)
    np.testing.assert_allclose(gx, (g1 + g2) * b, rtol=1e-14)
    # an input no output depends on gets zeros; an output that is an input passes its gradient on
    z = ph("z")
    _, back = G.compile([x * 2, x], [x, z])(a, b)
    (gx, gz), _ = back(g1, g2)
    np.testing.assert_allclose(gx, 2 * g1 + g2, rtol=1e-14)
    assert np.array_equal(gz, np.zeros(3))


def test_python_ops_run_in_every_stage(rng):
    x = ph("x")
    calls = []

    def cube(a):
        calls.append("cube")
        return a ** 3

    def square_times_3(a):
        calls.append("square")
        return 3 * a * a
    sq3 = python_op(square_times_3, graph_grad=lambda ins, outs, g: [6 * ins[0] * g[0]], name="sq3")
    cube_op = python_op(cube, graph_grad=lambda ins, outs, g: [sq3(ins[0]) * g[0]], name="cube")
    f = G.compile(create("reduce_sum", cube_op(x)), [x], stages=2)
    a, v = rng.standard_normal(4), rng.standard_normal(4)
    outs, back = f(a)
    assert calls == ["cube"]
    (g,), back2 = back(1.0)
    assert calls == ["cube", "square"]
    np.testing.assert_allclose(g, 3 * a * a, rtol=1e-14)
    (gg, gseed), _ = back2(v)
    np.testing.assert_allclose(gg, 6 * a * v, rtol=1e-14)
    np.testing.assert_allclose(gseed, [np.dot(v, 3 * a * a)], rtol=1e-14)
    # a numpy gradient runs in stage 1 as a Python node; it has no second derivative
    numpy_grad = python_op(lambda a: a ** 3, grad=lambda ins, outs, g: [3 * ins[0] ** 2 * g[0]], name="npcube")
    y = numpy_grad(x)
    _, back = G.compile(y, [x])(a)
    np.testing.assert_allclose(back(v)[0][0], 3 * a * a * v, rtol=1e-14)
    with pytest.raises(ValueError, match="npcube0_backward.*has no second derivative"):
        G.compile(y, [x], stages=2)


def test_variables_as_inputs(rng):
    x = ph("x")
    y = lua_module(x, "nn.Linear(3, 2)", name="fc", dtype="float64")
    w, b = y.list_input_variables()
    f = G.compile(create("tanh", y), [x, w, b])
    a, W, B = rng.standard_normal((4, 3)), rng.standard_normal((2, 3)), rng.standard_normal(2)
    outs, back = f(a, W, B)
    z = a @ W.T + B
    np.testing.assert_allclose(outs[0], np.tanh(z), rtol=1e-13)
    g = rng.standard_normal((4, 2))
    (gx, gw, gb), _ = back(g)
    d = g * (1 - np.tanh(z) ** 2)
    np.testing.assert_allclose(gx, d @ W, rtol=1e-12)
    np.testing.assert_allclose(gw, d.T @ a, rtol=1e-12)
    np.testing.assert_allclose(gb, d.sum(axis=0), rtol=1e-12)
