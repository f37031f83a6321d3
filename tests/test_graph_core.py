"""The graph core: symbols, passes, executor and session, with small test ops (graph_test_ops)."""
from __future__ import annotations

import numpy as np
import pytest

import luabridge
from luabridge.graph import Group, LuaCompute, Op, Session, Variable, create, gradients
from luabridge.graph import registry as R
from luabridge.graph.executor import GraphError, build_graph
from luabridge.graph.passes.infer import InferenceError, infer_shapes
from luabridge.graph.passes.plan_memory import EXTERNAL, plan_memory

from graph_test_ops import placeholder, register_all

register_all()


def fd_grad(f, x, eps=1e-6):
    """Central finite differences of a scalar function f at x (float64)."""
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        d = np.zeros_like(x)
        d[i] = eps
        g[i] = (f(x + d) - f(x - d)) / (2 * eps)
    return g


# ---- symbols ----

def test_names_inputs_outputs_and_internals():
    x = placeholder("x")
    w = Variable("w")
    y = create("t_mul", create("t_add", x, w, name="s"), w, name="p")
    assert y.list_input_names() == ["w"]
    assert [v.attr("name") for v in y.list_input_variables()] == ["w"]
    assert y.list_output_names() == ["p_output"]
    internals = y.get_internals()
    assert internals.list_output_names() == ["x_output", "w", "s_output", "p_output"]
    assert internals["s_output"].outputs[0].node.name == "s"
    assert Group([x, y]).list_output_names() == ["x_output", "p_output"]
    a, b = create("t_exp", x), create("t_exp", x)
    na, nb = a.attr("name"), b.attr("name")
    assert na.startswith("t_exp") and nb.startswith("t_exp") and na != nb


def test_missing_inputs_become_variables_and_attrs_are_strings():
    x = placeholder("x")
    fc = create("t_linear", x, num_hidden=10, name="fc1")
    assert fc.list_input_names() == ["fc1_weight", "fc1_bias"]
    assert fc.attr("num_hidden") == "10"
    s = create("t_fill", shape=(10, 20), value=1.5, flag=True)
    assert s.attr("shape") == "[10,20]" and s.attr("flag") == "True"
    assert R.parse_tuple(s.attr("shape")) == (10, 20)
    w = Variable("mine")
    fc2 = create("t_linear", x, weight=w, num_hidden=3, name="fc2")
    assert fc2.list_input_names() == ["mine", "fc2_bias"]
    with pytest.raises(TypeError, match="unknown input"):
        create("t_linear", x, nonsense=w, num_hidden=3)


@pytest.mark.skipif(not R.has("__add_symbol__"), reason="op library not present")
def test_operators_create_the_named_ops():
    x, y = Variable("x"), Variable("y")
    cases = {
        "__add_symbol__": x + y, "__add_scalar__": x + 2, "__sub_symbol__": x - y,
        "__sub_scalar__": x - 2, "__rsub_scalar__": 2 - x, "__mul_symbol__": x * y,
        "__mul_scalar__": 2 * x, "__div_symbol__": x / y, "__div_scalar__": x / 2,
        "__rdiv_scalar__": 2 / x, "__pow_symbol__": x ** y, "__pow_scalar__": x ** 2,
        "__rpow_scalar__": 2 ** x,
    }
    for name, s in cases.items():
        assert s.outputs[0].node.op.name == name
    neg = -x
    assert neg.outputs[0].node.op.name == "__mul_scalar__" and float(neg.attr("scalar")) == -1


# ---- values and gradients ----

def test_values_against_numpy(rng):
    a = rng.standard_normal((3, 4))
    b = rng.standard_normal((4, 5))
    w = rng.standard_normal((3, 5))
    x, y, v = placeholder("x"), placeholder("y"), Variable("v")
    z = create("t_add", create("t_matmul", x, y), create("t_exp", v))
    s = Session()
    s.assign("v", w)
    out = s.run(z, {x: a, y: b})
    np.testing.assert_allclose(out, a @ b + np.exp(w), rtol=1e-12)
    assert out.dtype == np.float64
    # float32 placeholders compute in float32
    x32 = placeholder("x32", dtype="float32")
    r = s.run(create("t_exp", x32), {x32: a})
    assert r.dtype == np.float32
    np.testing.assert_allclose(r, np.exp(a), rtol=1e-6)


def test_gradients_against_finite_differences(rng):
    a = rng.standard_normal((3, 4))
    b = rng.standard_normal((4, 2))
    x, y = placeholder("x"), placeholder("y")
    # x used three times: gradients from several consumers are summed
    loss = create("t_sum", create("t_mul", create("t_exp", create("t_matmul", x, y)),
                                  create("t_matmul", x, y)))
    gx, gy = gradients(loss, [x, y])
    s = Session()
    ga, gb = s.run([gx, gy], {x: a, y: b})

    def f(aa, bb):
        m = aa @ bb
        return float(np.sum(np.exp(m) * m))
    np.testing.assert_allclose(ga, fd_grad(lambda t: f(t, b), a), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gb, fd_grad(lambda t: f(a, t), b), rtol=1e-6, atol=1e-8)


def test_unconnected_input_gets_zeros_and_grad_ys_scale(rng):
    a = rng.standard_normal((2, 3))
    x, u = placeholder("x"), placeholder("u")
    y = create("t_exp", x)
    gx, gu = gradients(y, [x, u], grad_ys=[create("t_fill", shape=(2, 3), value=3.0)])
    s = Session()
    rx, ru = s.run([gx, gu], {x: a, u: a})
    np.testing.assert_allclose(rx, 3 * np.exp(a), rtol=1e-12)
    assert np.array_equal(ru, np.zeros_like(a))


def test_nn_module_forward_backward_against_numpy(rng):
    a = rng.standard_normal((5, 4))
    t = rng.standard_normal((5, 3))
    W0, b0 = rng.standard_normal((3, 4)), rng.standard_normal(3)
    x, tg = placeholder("x"), placeholder("t")
    h = create("t_linear", x, num_hidden=3, name="fc")
    loss = create("t_mse", create("t_tanh", h), tg)
    w, b = h.list_input_variables()
    scaled = create("t_mul", loss, create("t_fill", shape=(1,), value=2.0))  # criterion grad scaled
    gw, gb, gx = gradients(scaled, [w, b, x])
    s = Session(poison=True)
    s.assign("fc_weight", W0)
    s.assign("fc_bias", b0)
    L, GW, GB, GX = s.run([scaled, gw, gb, gx], {x: a, tg: t})

    def f(xx, ww, bb):
        return 2 * float(np.mean((np.tanh(xx @ ww.T + bb) - t) ** 2))
    assert L.shape == (1,)
    np.testing.assert_allclose(L[0], f(a, W0, b0), rtol=1e-12)
    np.testing.assert_allclose(GW, fd_grad(lambda q: f(a, q, b0), W0), rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(GB, fd_grad(lambda q: f(a, W0, q), b0), rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(GX, fd_grad(lambda q: f(q, W0, b0), a), rtol=1e-6, atol=1e-9)
    # the module's parameters are re-pointed at the variables every call: a new weight is used
    s.assign("fc_weight", 2 * W0)
    np.testing.assert_allclose(s.run(scaled, {x: a, tg: t})[0], f(a, 2 * W0, b0), rtol=1e-12)


# ---- state, groups, initialisation ----

def test_variables_persist_assign_and_group_returns_none():
    v = Variable("counter")
    one = create("t_fill", shape=(2,), value=1.0)
    init = create("t_assign", v, create("t_fill", shape=(2,), value=5.0))
    step = create("t_assign", v, create("t_add", v, one))
    s = Session()
    with pytest.raises(ValueError, match="'counter' is read before it was initialised"):
        s.run(step)
    g = create("_nop")
    g._add_control_deps(Group([init]))
    assert s.run(g) is None  # a graph that only assigns an uninitialised variable runs
    np.testing.assert_array_equal(s.variable("counter"), [5, 5])
    assert list(s.run(step)) == [6, 6]
    res = s.run([v, step])
    np.testing.assert_array_equal(res[0], [7, 7])  # fetched variables are read after the run
    np.testing.assert_array_equal(s.variable(v), [7, 7])
    # reallocated on a new shape
    s.assign("counter", np.zeros((3, 2)))
    assert s.run(v).shape == (3, 2)


def test_assign_runs_after_readers_of_the_old_value():
    v = Variable("acc")
    read = create("t_exp", v)
    upd = create("t_assign", v, create("t_fill", shape=(1,), value=0.0))
    s = Session()
    s.assign("acc", np.array([1.0]))
    r, _ = s.run([read, upd])
    np.testing.assert_allclose(r, [np.e])
    np.testing.assert_array_equal(s.variable("acc"), [0.0])


def test_graph_assigning_then_reading_an_uninitialised_variable_runs():
    v = Variable("fresh")
    upd = create("t_assign", v, create("t_fill", shape=(3,), value=2.0))
    newer = upd.list_input_variables()[0]
    assert newer.outputs[0].version == 1
    read = create("t_exp", newer)
    s = Session()
    np.testing.assert_allclose(s.run([read, upd])[0], np.exp([2.0] * 3).astype(np.float32), rtol=1e-6)
    with pytest.raises(ValueError, match="'fresh'"):
        Session().run(create("t_exp", v))  # the old version: read before any assignment


def test_infer_shapes_by_name():
    from luabridge.graph import infer_shapes as by_name
    x = placeholder("x")
    fc = create("t_linear", x, num_hidden=7, name="fc")
    shapes = by_name(fc, {"x": (5, 3)})
    assert shapes["fc_weight"] == (7, 3) and shapes["fc_bias"] == (7,) and shapes["fc_output"] == (5, 7)
    assert by_name(fc, {})["fc_weight"] is None


def test_missing_feed_names_the_placeholder():
    x, y = placeholder("xin"), placeholder("yin")
    s = Session()
    with pytest.raises(KeyError, match="'yin'"):
        s.run(create("t_add", x, y), {x: np.ones(2)})


# ---- executor cache ----

def test_cache_hits_reinference_and_lru():
    x = placeholder("x")
    e1, e2, e3 = create("t_exp", x), create("t_exp", x), create("t_exp", x)
    s = Session(cache_size=2)
    for _ in range(3):
        s.run(e1, {x: np.ones(3)})
    assert s.stats == {"hits": 2, "misses": 1, "stale": 0}
    ex = s.executor_for(e1)
    assert ex.builds == 1
    s.run(e1, {x: np.ones((2, 2))})  # a new feed shape: inferred and planned again
    assert ex.builds == 2
    s.run(e1, {x: np.ones((2, 2))})
    assert ex.builds == 2
    s.run(e2, {x: np.ones(3)})
    s.run(e3, {x: np.ones(3)})  # evicts e1 (least recently used)
    misses = s.stats["misses"]
    s.run(e3, {x: np.ones(3)})
    assert s.stats["misses"] == misses
    s.run(e1, {x: np.ones(3)})
    assert s.stats["misses"] == misses + 1


def test_stale_executor_is_rebuilt_on_new_version():
    v = Variable("sv")
    s = Session()
    s.assign("sv", np.array([2.0]))
    assert s.run(v)[0] == 2.0
    create("t_assign", v, create("t_fill", shape=(1,), value=3.0))  # bumps sv's version
    latest = create("t_exp", v).list_input_variables()[0]  # the variable at its newest version
    assert latest.outputs[0].version == 1
    s.run(latest)
    assert s.stats["stale"] == 1


# ---- errors ----

def test_failing_ops_name_op_and_node_and_session_stays_usable():
    x = placeholder("x")
    s = Session()
    with pytest.raises(GraphError, match=r"op 't_fail' \(node 'bad'\) failed: .*boom"):
        s.run(create("t_fail", create("t_exp", x), name="bad"), {x: np.ones(2)})
    with pytest.raises(GraphError, match=r"op 't_pyfail' \(node 'pybad'\) failed: RuntimeError: py boom"):
        s.run(create("t_pyfail", x, name="pybad"), {x: np.ones(2)})
    assert isinstance(GraphError("m"), luabridge.LuaError)
    np.testing.assert_allclose(s.run(create("t_exp", x), {x: np.zeros(2)}), [1, 1])


def test_shape_errors_name_the_nodes():
    x, y = placeholder("x"), placeholder("y")
    s = Session()
    with pytest.raises(InferenceError, match=r"t_matmul \(node 'mm'\)"):
        s.run(create("t_matmul", x, y, name="mm"), {x: np.ones((2, 3)), y: np.ones((2, 3))})
    g = build_graph(create("t_add", x, Variable("free"), name="sum").outputs)
    with pytest.raises(InferenceError, match="stays unknown"):
        infer_shapes(g)
    # backward sweep: an output's shape flows to the inputs of a same-shape op
    g = build_graph(create("t_add", x, Variable("w2")).outputs)
    shapes = [None] * g.num_entries
    shapes[-1] = (4,)
    g = infer_shapes(g, shapes)
    assert g.attrs["shape"] == [(4,)] * 3


# ---- memory planning ----

def _mlp_graph(depth: int = 6):
    x = placeholder("x")
    h = x
    for i in range(depth):
        h = create("t_exp", create("t_mul", h, Variable(f"k{i}")))
    loss = create("t_sum", h)
    grads = gradients(loss, loss.list_input_variables())
    return x, loss, grads


def _check_no_live_overlap(g):
    """No two entries live at one step share memory, except an in-place handoff (one chain:
    the output written over its input at the input's last reader)."""
    sid, life = g.attrs["storage_id"], g.attrs["lifetime"]
    offsets, dtypes = g.attrs["storage_offset"], g.attrs["storage_dtype"]
    spans = []
    for eid, s in enumerate(sid):
        if s >= 0:
            n = -(-g.attrs["storage_bytes"][s] // np.dtype(dtypes[s]).itemsize)
            spans.append((s, dtypes[s], offsets[s], offsets[s] + n, *life[eid]))
    for i, (s1, t1, lo1, hi1, a1, b1) in enumerate(spans):
        for s2, t2, lo2, hi2, a2, b2 in spans[i + 1:]:
            if t1 != t2 or hi1 <= lo2 or hi2 <= lo1:
                continue  # different arenas or disjoint addresses
            if s1 == s2:
                assert b1 <= a2 or b2 <= a1, "an in-place chain's entries overlap in time"
            else:
                assert b1 < a2 or b2 < a1, f"live entries over steps {a1}-{b1} and {a2}-{b2} share memory"


def test_memory_plan_never_shares_live_entries_and_poisoning(rng):
    x, loss, grads = _mlp_graph()
    ks = [rng.uniform(0.1, 0.3, 8) for _ in range(6)]
    a = rng.uniform(0, 1, 8)

    def ref():
        h, hs = a, []
        for k in ks:
            hs.append(h)
            h = np.exp(h * k)
        out = [h.sum()]
        g = np.ones(8)
        gk = []
        for i in reversed(range(6)):
            pre = hs[i] * ks[i]
            g = g * np.exp(pre)
            gk.append(g * hs[i])
            g = g * ks[i]
        return out, gk[::-1]

    s = Session(poison=True)
    for i, k in enumerate(ks):
        s.assign(f"k{i}", k)
    res = s.run([loss] + grads, {x: a})
    want_loss, want_g = ref()
    np.testing.assert_allclose(res[0], want_loss, rtol=1e-12)
    for got, want in zip(res[1:], want_g):
        np.testing.assert_allclose(got, want, rtol=1e-12)
    g = s.executor_for([loss] + grads).plan.graph
    _check_no_live_overlap(g)
    rep = g.attrs["memory"]
    assert rep.planned_bytes < rep.naive_bytes
    assert rep.planned_bytes <= 1.5 * rep.lower_bound_bytes
    # variables are never planned
    for n in g.nodes:
        if n.op is None:
            assert g.attrs["storage_id"][g.entry_id(n)] == EXTERNAL


def test_in_place_reuse_where_the_input_dies():
    x = placeholder("x")
    h = x
    for _ in range(5):
        h = create("t_exp", h)  # in-place capable, each input dies at its consumer
    g = plan_memory(infer_shapes(build_graph(h.outputs), [(16,)] + [None] * 5, None))
    sids = g.attrs["storage_id"]
    assert len(set(sids)) == 1 and g.attrs["memory"].num_storages == 1
    assert g.attrs["memory"].planned_bytes == 16 * 8
    both = create("t_add", create("t_exp", x), x)  # x still read later: no in-place on it
    g2 = plan_memory(infer_shapes(build_graph(both.outputs), [(16,), None, None], None))
    assert g2.attrs["storage_id"][0] != g2.attrs["storage_id"][1]
    _check_no_live_overlap(g2)


@pytest.mark.parametrize("n", [1, 5, 8, 9, 100])
def test_planned_bytes_never_exceed_one_aligned_buffer_per_entry(n):
    """naive_bytes: each entry in its own buffer at a 64-byte boundary, as the arena places them;
    the plan never needs more, whatever the padding."""
    x = placeholder("x")
    out = create("t_add", create("t_exp", x), create("t_mul", x, x))
    g = plan_memory(infer_shapes(build_graph(out.outputs), [(n,)] + [None] * 3, None))
    m = g.attrs["memory"]
    entry = -(-8 * n // 64) * 64   # n float64 values, rounded up to 64 bytes
    assert m.naive_bytes == 4 * entry   # x, exp, mul and add
    assert m.lower_bound_bytes <= m.planned_bytes <= m.naive_bytes


def test_build_errors_name_the_node():
    R.register(Op("t_badsrc", infer_shape=lambda a, i: (i, [i[0]]),
                  compute=LuaCompute("function(x, y) error('cannot build') end")))
    x = placeholder("x")
    s = Session()
    with pytest.raises(GraphError, match=r"building op 't_badsrc' \(node 'nb'\) failed: .*cannot build"):
        s.run(create("t_badsrc", x, name="nb"), {x: np.ones(2)})
    np.testing.assert_allclose(s.run(create("t_exp", x), {x: np.zeros(2)}), [1, 1])


@pytest.mark.parametrize("seed", range(12))
def test_random_graphs_with_poisoned_frees_match_numpy(seed):
    """Random DAGs of in-place-capable and plain ops, several fetches and gradients: the plan
    keeps live entries apart (checked on the plan and, with freed memory poisoned by NaN, on
    the values) and the results match numpy float64."""
    rng = np.random.default_rng(seed)
    ops = {"t_add": lambda a, b: a + b, "t_mul": lambda a, b: a * b, "t_tanhc": np.tanh}
    x = placeholder("x")
    nodes, fns = [x], [lambda v: v]
    for _ in range(int(rng.integers(4, 14))):
        name = rng.choice(list(ops))
        picks = [int(rng.integers(0, len(nodes))) for _ in range(1 if name == "t_tanhc" else 2)]
        nodes.append(create(name, *(nodes[i] for i in picks)))
        fns.append(lambda v, f=ops[name], p=picks: f(*(fns[i](v) for i in p)))
    fetch = sorted({int(i) for i in rng.integers(1, len(nodes), size=3)})
    loss = create("t_sum", nodes[-1])
    gx, = gradients(loss, [x])
    a = rng.uniform(-1, 1, 5)
    s = Session(poison=True)
    res = s.run([nodes[i] for i in fetch] + [gx], {x: a})
    for i, r in zip(fetch, res):
        np.testing.assert_allclose(r, fns[i](a), rtol=1e-12, atol=1e-12)
    want = fd_grad(lambda v: float(np.sum(fns[-1](v))), a)
    np.testing.assert_allclose(res[-1], want, rtol=1e-6, atol=1e-7)
    plan = s.executor_for([nodes[i] for i in fetch] + [gx]).plan.graph
    _check_no_live_overlap(plan)
    m = plan.attrs["memory"]   # 40-byte entries: the arena's 64-byte alignment pads each of them
    assert m.lower_bound_bytes <= m.planned_bytes <= m.naive_bytes
