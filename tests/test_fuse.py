"""The fusion pass (luabridge/graph/passes/fuse.py), the fusion IR's vocabulary run by the CPU
kernels (lua/luabridge/graph/fusion_ir.lua) and Session("cpu fusion") / ("gpu fusion", numpy standing in):
which nodes fuse and which must not, values against unfused runs and numpy float64 references,
gradient graphs, the memory plan and tinyflow's examples."""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import numpy as np
import pytest

import luabridge
import luabridge.tinyflow as tf
from fuse_reference import FN_REFERENCE
from helpers import load_bench
from luabridge.graph import Session, fusion_ir
from luabridge.graph.fusion_ir import FNS, FusedGroup, evaluate
from luabridge.core.interop import from_numpy
from luabridge.core.runtime import bridge

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _run(z, feed, config):
    s = Session(config)
    return s, s.run(z, feed)


def _fusion(s, z):
    return s.executor_for(z).plan.graph.attrs["fusion"]


# ---- what fuses ----

def test_a_chain_fuses_into_one_group_listed_by_node_name(rng):
    x, y = tf.placeholder(tf.float32, name="x"), tf.placeholder(tf.float32, name="y")
    a = x * 2.0
    z = tf.sqrt(tf.exp(a + y) - y) / (a + 1.5)   # a is read twice, both times inside the group
    feed = {x: rng.random((3, 5), np.float32), y: rng.random((3, 5), np.float32)}
    s, got = _run(z, feed, "cpu fusion")
    groups = _fusion(s, z)
    assert len(groups) == 1 and len(groups[0]) == 7 and groups[0][-1] == z.name
    fused = [n for n in s.executor_for(z).plan.graph.nodes if n.op is not None and n.op.name == "_fused"]
    assert len(fused) == 1 and sorted(fused[0].attrs["group"].inputs) == ["x", "y"]
    ax, ay = (feed[k].astype(np.float64) for k in (x, y))
    ref = np.sqrt(np.exp(2 * ax + ay) - ay) / (2 * ax + 1.5)
    np.testing.assert_allclose(got, ref, rtol=2e-6)


def test_an_intermediate_read_elsewhere_ends_the_group(rng):
    x = tf.placeholder(tf.float32, name="x")
    m = x * 3.0
    a = tf.exp(m)
    z = a + 1.0
    s = Session("cpu fusion")
    feed = {x: rng.random(7, np.float32)}
    got_a, got_z = s.run([a, z], feed)
    groups = s.executor_for([a, z]).plan.graph.attrs["fusion"]
    assert groups == [[m.name, a.name]]   # z = a + 1 alone is no group
    ref = np.exp(3 * feed[x].astype(np.float64))
    np.testing.assert_allclose(got_a, ref, rtol=1e-6)
    np.testing.assert_allclose(got_z, ref + 1, rtol=1e-6)


def test_non_elementwise_ops_and_other_dtypes_split_groups(rng):
    x = tf.placeholder(tf.float32, name="x")
    w = tf.Variable(tf.zeros([4, 3]), name="fuse_w43")
    h = tf.matmul(x * 2.0 + 1.0, w)            # matmul: not elementwise
    z = tf.exp(h) * 0.5
    i = tf.placeholder("int32", name="i")
    k = (i + 1) * 2                           # int32: never fused
    s = Session("cpu fusion")
    s.run(tf.assign(w, tf.normal([4, 3], 1.0)))
    wv = s.variable("fuse_w43").astype(np.float64)
    ax = rng.random((2, 4), np.float32)
    gz, gk = s.run([z, k], {x: ax, i: np.arange(5, dtype=np.int32)})
    groups = s.executor_for([z, k]).plan.graph.attrs["fusion"]
    assert len(groups) == 2 and all(len(g) == 2 for g in groups)
    assert not any(n.startswith("matmul") for g in groups for n in g)
    np.testing.assert_allclose(gz, 0.5 * np.exp((2 * ax + 1) @ wv), rtol=1e-5)
    np.testing.assert_array_equal(gk, (np.arange(5) + 1) * 2)


@pytest.mark.parametrize("n", [10, 5000])
def test_a_long_chain_splits_into_groups_of_at_most_64_nodes(rng, n):
    x = tf.placeholder(tf.float32, name="x")
    z = x
    for k in range(200):
        z = (z * 0.5 + x) if k % 2 else tf.sqrt(z + 0.25)
    ax = rng.random(n, np.float32)
    s, got = _run(z, {x: ax}, "cpu fusion")
    sizes = [len(g) for g in _fusion(s, z)]
    assert sum(sizes) == 400 and max(sizes) == 64
    v, a = ax.astype(np.float64), ax.astype(np.float64)
    for k in range(200):
        v = (v * 0.5 + a) if k % 2 else np.sqrt(v + 0.25)
    np.testing.assert_allclose(got, v, rtol=1e-5)


def test_float64_graphs_fuse_in_float64(rng):
    x = tf.placeholder(tf.float64, name="x")
    z = tf.log(x * x + 1.0) - x
    ax = rng.standard_normal(100)
    s, got = _run(z, {x: ax}, "cpu fusion")
    assert got.dtype == np.float64 and len(_fusion(s, z)) == 1
    np.testing.assert_allclose(got, np.log(ax * ax + 1) - ax, rtol=1e-13)


def test_no_fusing_across_a_write():
    """m * 2 reads v before the assign writes it; the root runs after the write, so the read
    stays a node of its own and sees the old value."""
    v = tf.Variable(tf.zeros([3]), name="fuse_v3")
    x = tf.placeholder(tf.float32, name="x")
    old = v * 2.0
    new = tf.assign(v, x)
    z = (old + 1.0) * new
    s = Session("cpu fusion")
    s.run(tf.assign(v, tf.ones([3])))
    got = s.run(z, {x: np.array([1, 2, 3], np.float32)})
    np.testing.assert_allclose(got, (2 * 1 + 1) * np.array([1, 2, 3]))
    assert all(old.name not in g for g in _fusion(s, z))


def test_broadcast_operands_of_shape_1(rng):
    x, c = tf.placeholder(tf.float32, name="x"), tf.placeholder(tf.float32, name="c")
    z = tf.equal(x * c - c, x) + (x / c) ** 2.0
    ax = rng.integers(0, 3, (4, 6)).astype(np.float32)
    for cv in (1.0, 2.0):
        s, got = _run(z, {x: ax, c: np.array([cv], np.float32)}, "cpu fusion")
        group = next(n for n in s.executor_for(z).plan.graph.nodes
                     if n.op is not None and n.op.name == "_fused").attrs["group"]
        assert group.scalar_inputs == {group.inputs.index("c")}
        a = ax.astype(np.float64)
        np.testing.assert_allclose(got, (a * cv - cv == a) + (a / cv) ** 2, rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [5, 3000, 70000, 1000003])   # a Lua loop, blocked ufuncs, large blocks with a tail
def test_fused_equals_unfused_and_numpy(rng, dtype, n):
    code = tf.float32 if dtype == np.float32 else tf.float64
    x, y = tf.placeholder(code, name="x"), tf.placeholder(code, name="y")
    z = 2.0 / (tf.sqrt(x * y + 0.5) + 1.0) - 3.0 ** (x - 1.0) + tf.exp(-x) * (1.0 - y)
    ax, ay = rng.random(n).astype(dtype), rng.random(n).astype(dtype)
    fused = _run(z, {x: ax, y: ay}, "cpu fusion")[1]
    plain = _run(z, {x: ax, y: ay}, "cpu")[1]
    a, b = ax.astype(np.float64), ay.astype(np.float64)
    ref = 2 / (np.sqrt(a * b + 0.5) + 1) - 3.0 ** (a - 1) + np.exp(-a) * (1 - b)
    tol = 2e-6 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(fused, ref, rtol=tol, atol=tol)
    np.testing.assert_allclose(fused, plain, rtol=tol, atol=tol)


def test_memory_plan_sees_only_the_groups_inputs_and_outputs(rng):
    x = tf.placeholder(tf.float32, name="x")
    z = x
    for k in range(8):
        z = tf.sqrt(z * 1.5 + float(k))
    feed = {x: rng.random(1000, np.float32)}
    plain, fused = Session("cpu"), Session("cpu fusion")
    np.testing.assert_allclose(fused.run(z, feed), plain.run(z, feed), rtol=1e-6)
    mp = plain.executor_for(z).plan.graph.attrs["memory"]
    mf = fused.executor_for(z).plan.graph.attrs["memory"]
    aligned = 4032                               # 1000 float32, rounded up to 64 bytes
    assert mf.naive_bytes == 2 * aligned         # the feed and the output, nothing between
    assert mp.naive_bytes == 25 * aligned
    assert mf.num_storages <= mp.num_storages


def test_the_readme_graph_plans_no_more_than_one_buffer_per_entry():
    """The README's fusion example: with fusion the plan holds x, b and the group's output (20, 4
    and 20 bytes, each padded to 64 as the arena places buffers); planned <= naive everywhere."""
    x, b = tf.placeholder(tf.float32, name="x"), tf.placeholder(tf.float32, name="b")
    w = tf.Variable(tf.zeros([5]), name="fuse_readme_w")
    y = tf.sqrt(tf.nn.relu(x * w + b)) / (x + 1.0)
    grad_w, = tf.gradients(tf.reduce_sum(tf.exp(y)), [w])
    feed = {x: np.float32([1, 2, 3, 4, 5]), b: np.float32([0.5])}
    for config in ("cpu", "cpu fusion"):
        s = Session(config)
        s.assign("fuse_readme_w", np.float32([0.5, -1, 2, 0.25, 1]))
        for fetch in (y, grad_w):
            s.run(fetch, feed)
            m = s.executor_for(fetch).plan.graph.attrs["memory"]
            assert m.lower_bound_bytes <= m.planned_bytes <= m.naive_bytes, (config, str(m))
            if config == "cpu fusion" and fetch is y:
                assert m.naive_bytes == 3 * 64


# ---- gradients ----

def test_gradient_graphs_fuse_and_give_the_same_gradients(rng):
    x = tf.placeholder(tf.float32, name="x")
    w = tf.Variable(tf.zeros([6]), name="fuse_w6")
    loss = tf.reduce_sum(tf.exp(x * w) * 3.0 + tf.sqrt(w * w + 1.0) / x)
    grads = tf.gradients(loss, [w, x])
    ax = rng.random(6, np.float32) + 0.5
    wv = rng.standard_normal(6).astype(np.float32)
    results = {}
    for cfg in ("cpu", "cpu fusion"):
        s = Session(cfg)
        s.assign("fuse_w6", wv)
        results[cfg] = s.run(grads, {x: ax})
        if cfg == "cpu fusion":
            groups = s.executor_for(grads).plan.graph.attrs["fusion"]
            assert any(any("grad" in n for n in g) for g in groups)
    a, v = ax.astype(np.float64), wv.astype(np.float64)
    ref_w = 3 * a * np.exp(a * v) + v / np.sqrt(v * v + 1) / a
    ref_x = 3 * v * np.exp(a * v) - np.sqrt(v * v + 1) / a ** 2
    for got in results.values():
        np.testing.assert_allclose(got[0], ref_w, rtol=1e-5)
        np.testing.assert_allclose(got[1], ref_x, rtol=1e-5)
    for f, p in zip(results["cpu fusion"], results["cpu"]):
        np.testing.assert_allclose(f, p, rtol=1e-6)


# ---- the IR's vocabulary on the CPU kernels ----

def _kernel(exprs, inputs, out, blocked):
    b = bridge()
    fused = b.module("luabridge.graph.fusion_ir")
    closure = b.call(fused.closure, b.lua.table_from([fusion_ir.as_lists(e) for e in exprs], recursive=True),
                     b.lua.table_from([from_numpy(a) for a in inputs]), b.lua.table_from([from_numpy(out)]),
                     blocked)
    closure()
    return out


def _operands(rng, fn, dtype, n):
    """Inputs of fn: positive where the fn needs it, small integers for comparisons (ties)."""
    arity = FNS[fn][0]
    if fn in ("lt", "le", "gt", "ge", "eq", "ne", "where"):
        return [rng.integers(-1, 2, n).astype(dtype) for _ in range(arity)]
    if fn in ("log", "sqrt", "rsqrt", "pow"):
        return [(rng.random(n) + 0.1).astype(dtype) for _ in range(arity)]
    if fn == "clamp":
        return [rng.standard_normal(n).astype(dtype), np.full(n, -0.5, dtype), np.full(n, 0.5, dtype)]
    return [rng.standard_normal(n).astype(dtype) for _ in range(arity)]


def test_the_vocabulary_is_documented_and_checked():
    assert set(FN_REFERENCE) == set(FNS)
    fusion_ir.check(("where", ("gt", ("in", 0), ("const", 0.0)), ("in", 1), ("const", 2.0)), 2)
    with pytest.raises(ValueError, match="unknown fn 'cube'"):
        fusion_ir.check(("cube", ("in", 0)), 1)
    with pytest.raises(ValueError, match="add takes 2 operands"):
        fusion_ir.check(("add", ("in", 0)), 1)


@pytest.mark.parametrize("blocked", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fn", sorted(FNS))
def test_each_fn_on_the_cpu_kernels(rng, fn, dtype, blocked):
    n = 3000
    ins = _operands(rng, fn, dtype, n)
    expr = (fn, *[("in", k) for k in range(len(ins))])
    got = _kernel([expr], ins, np.empty(n, dtype), blocked)
    ref = FN_REFERENCE[fn](*[a.astype(np.float64) for a in ins])
    tol = 2e-6 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(got, ref, rtol=tol, atol=tol)
    np.testing.assert_allclose(evaluate(expr, ins), ref, rtol=tol, atol=tol)


@pytest.mark.parametrize("blocked", [False, True])
def test_constants_broadcast_inputs_and_shared_subexpressions(rng, blocked):
    n = 5000
    x = rng.standard_normal(n).astype(np.float32)
    s = np.array([0.75], np.float32)
    t = ("mul", ("in", 0), ("in", 1))   # used three times, computed once
    expr = ("clamp", ("add", t, ("where", ("gt", t, ("const", 0.0)), ("sigmoid", t), ("const", -2.0))),
            ("const", -1.0), ("neg", ("in", 1)))
    got = _kernel([expr], [x, s], np.empty(n, np.float32), blocked)
    a = x.astype(np.float64) * 0.75
    ref = np.clip(a + np.where(a > 0, 1 / (1 + np.exp(-a)), -2.0), -1.0, -0.75)
    np.testing.assert_allclose(got, ref, rtol=2e-6, atol=2e-6)
    group = FusedGroup(("x", "s"), (expr,), "float32", "cpu", ("n",), frozenset({1}))
    np.testing.assert_allclose(evaluate(group, [x, s])[0], ref, rtol=2e-6, atol=2e-6)


def test_strided_operands_run_over_contiguous_copies(rng):
    b = bridge()
    x = rng.standard_normal((6, 8))
    y = np.zeros((8, 6))
    xt = from_numpy(x)
    yt = from_numpy(y)
    transposed = b.lua.eval("function(t) return t:t() end")
    out = b.call(b.module("luabridge.graph.fusion_ir").closure,
                 b.lua.table_from([["mul", ["in", 0], ["const", 2.0]]], recursive=True),
                 b.lua.table_from([transposed(xt)]), b.lua.table_from([yt]), False)
    out()
    np.testing.assert_array_equal(y, 2 * x.T)


def test_a_size_mismatch_is_a_clear_error():
    with pytest.raises(luabridge.LuaError, match="fused group: input 1 has 3 elements, the output 4"):
        _kernel([("neg", ("in", 0))], [np.zeros(3)], np.zeros(4), False)


# ---- sessions and the examples ----

def test_config_names(rng):
    assert Session("cpu fusion").device.fusion and not Session("cpu").device.fusion
    with pytest.raises(ValueError, match="'cpu fusion'"):
        Session("fusion")


def test_gpu_fusion_matches_cpu(numpy_device, rng):
    """"gpu fusion": the fused node calls luabridge.providers.torch_cuda.fuse.kernel (numpy standing in)."""
    x, c = tf.placeholder(tf.float32, name="x"), tf.placeholder(tf.float32, name="c")
    w = tf.Variable(tf.zeros([5]), name="fuse_w5")
    loss = tf.reduce_sum(tf.exp(x * w - c) * 2.0 + w * w)
    grads = tf.gradients(loss, [w])
    feed = {x: rng.random(5, np.float32), c: np.array([0.5], np.float32)}
    out = {}
    for cfg in ("cpu", "gpu fusion"):
        s = Session(cfg)
        s.assign("fuse_w5", np.linspace(-1, 1, 5).astype(np.float32))
        out[cfg] = s.run([loss] + grads, feed)
        if cfg == "gpu fusion":
            assert s.device.name == "cuda" and s.executor_for([loss] + grads).plan.graph.attrs["fusion"]
    for g, c in zip(out["gpu fusion"], out["cpu"]):
        np.testing.assert_allclose(g, c, rtol=1e-5)


def _example(name: str):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name, argv", [("tinyflow_lenet", ["--epochs", "1", "--steps", "6"]),
                                        ("tinyflow_softmax", ["--steps", "30"])])
def test_tinyflow_examples_give_the_same_results_fused(monkeypatch, capsys, name, argv):
    """LeNet (Adam's updates fuse) and the softmax MLP, on "cpu" and on "cpu fusion"."""
    pytest.importorskip("sklearn")
    runs, sessions = {}, []

    def session(config):
        sessions.append(Session(config))
        return sessions[-1]
    for cfg in ("cpu", "cpu fusion"):
        monkeypatch.setattr(tf, "Session", lambda *a, _cfg=cfg, **k: session(_cfg))
        acc = _example(name).main(argv)
        out = capsys.readouterr().out
        runs[cfg] = (acc, [float(v) for v in re.findall(r"cross_entropy=(\S+)", out)])
    fused = [ex.plan.graph.attrs["fusion"] for _, ex in sessions[-1]._cache.values() if ex.plan]
    assert any(fused)   # the optimizer's updates at least
    (acc0, loss0), (acc1, loss1) = runs["cpu"], runs["cpu fusion"]
    assert acc1 == pytest.approx(acc0, abs=0.01)
    np.testing.assert_allclose(loss1, loss0, rtol=1e-4)


# ---- bench/fusion.py's chains (no timing asserts) ----

CHAIN_REFS = {   # the bench's chains written out in float64
    "cheap": lambda x, y: (np.sqrt(np.maximum(x * 1.5 + y - 0.25, 0)) * y + 1) / y,
    "transcendental": lambda x, y: np.exp(-np.log(np.tanh(np.exp(x * 0.5)) + y)) + 1,
    "mixed": lambda x, y: np.exp(3 * np.tanh(np.log(np.exp(x * y) + 1) - y)),
}


@pytest.mark.parametrize("name", sorted(CHAIN_REFS))
def test_bench_chains_compute_the_same_values_everywhere(name):
    bench = load_bench("fusion.py", "bench_fusion")
    rng = np.random.default_rng(1)
    xv, yv = ((rng.random(3000) + 0.5).astype(np.float32) for _ in range(2))
    want = CHAIN_REFS[name](xv.astype(np.float64), yv.astype(np.float64))
    chain = bench.CHAINS[name]
    x, y = tf.placeholder(tf.float32, name="x"), tf.placeholder(tf.float32, name="y")
    z = chain(x, y, bench.GraphOps)
    for cfg in ("cpu", "cpu fusion"):
        np.testing.assert_allclose(Session(cfg).run(z, {x: xv, y: yv}), want, rtol=1e-5)
    np.testing.assert_allclose(chain(xv, yv, bench.NumpyOps(np.empty_like(xv))), want, rtol=1e-5)
    torch = pytest.importorskip("torch")
    xt, yt = torch.from_numpy(xv), torch.from_numpy(yv)
    got = chain(xt, yt, bench.TorchOps(torch, torch.empty_like(xt)))
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5)
