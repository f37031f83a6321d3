"""Smoke tests of bench/executor.py's helpers: what it times computes the right values (no
timing asserts)."""
import numpy as np
import pytest

from helpers import load_bench


@pytest.fixture(scope="module")
def bench():
    return load_bench("executor.py", "bench_executor")


def _chain_numpy(x: np.ndarray, n: int) -> np.ndarray:
    """The bench's chain, written out independently: v*0.5, v+x, exp(v), v*x, repeated."""
    v = x
    for i in range(n):
        v = (v * 0.5, v + x, np.exp(v), v * x)[i % 4]
    return v


@pytest.mark.parametrize("n", [1, 7, 200])
def test_chain_runs_the_same_ops_in_graph_numpy_and_torch(bench, n):
    x64 = bench.chain_input().astype(np.float64)
    want = _chain_numpy(x64, n)
    np.testing.assert_allclose(bench.chain_reference(n), want, rtol=1e-12)
    tf = bench.tf
    x = tf.placeholder(tf.float32)
    got = tf.Session().run(bench.chain_function(n)(x, *bench.symbol_ops()), {x: bench.chain_input()})
    np.testing.assert_allclose(got, want, rtol=1e-5)
    outs = [np.empty(4) for _ in range(n)]
    res = bench.chain_function(n, out=True)(x64, np.multiply, np.add, np.exp, outs)
    assert res is outs[-1]
    np.testing.assert_allclose(res, want, rtol=1e-12)
    torch = pytest.importorskip("torch")
    t = torch.from_numpy(x64)
    np.testing.assert_allclose(bench.chain_function(n)(t, torch.mul, torch.add, torch.exp).numpy(), want, rtol=1e-12)


def test_split_separates_the_fixed_cost(bench):
    fixed, node = bench.split(1.0 + 0.5, 1.0 + 200 * 0.5, 200)
    assert node == pytest.approx(0.5) and fixed == pytest.approx(1.0)


@pytest.mark.parametrize("model", ["MLP 784-512-512-10", "LeNet-5"])
def test_training_graph_memory_report_is_consistent(bench, model):
    g = bench.TrainingGraph(model, 8)
    images, labels = bench.batch_of(g.shape)
    losses = [g.step(images, labels) for _ in range(3)]
    assert losses[-1] < losses[0]  # SGD on one batch lowers its loss
    m = g.memory()
    assert 0 < m.lower_bound_bytes <= m.planned_bytes <= m.naive_bytes
    # the largest activation (the first layer's output, float32) is live at some step
    first = 8 * (512 if model.startswith("MLP") else 6 * 24 * 24) * 4
    assert m.lower_bound_bytes >= first
    names = [f"{layer}_{p}" for layer in g.layers for p in ("weight", "bias")]
    values = [np.full(g.sess.variable(n).shape, k, np.float32) for k, n in enumerate(names)]
    g.set_weights(values)
    for n, v in zip(names, values):
        np.testing.assert_array_equal(g.sess.variable(n), v)
    with pytest.raises(ValueError):
        g.set_weights(values[:-1])


def test_lenet_steps_agree_with_pytorch(bench):
    """The three runners of (c) start from the same weights; PyTorch, given those weights,
    computes the same first loss."""
    import luabridge
    luabridge.require("torch").manualSeed(7)
    steppers = bench.lenet_steppers(4)
    first = [step() for step in steppers.values()]
    np.testing.assert_allclose(first, first[0], rtol=1e-5)
    torch = pytest.importorskip("torch")
    luabridge.require("torch").manualSeed(7)  # the same draws: the model lenet_steppers built
    model, params, _ = luabridge.runtime().execute(bench.LUA_LENET, str(bench.LENET))
    w = [torch.from_numpy(luabridge.to_numpy(params[i]).astype(np.float64)) for i in range(1, len(params) + 1)]
    images, labels = bench.batch_of((4, 1, 28, 28))
    F = torch.nn.functional
    h = torch.from_numpy(images.astype(np.float64))
    for i in (0, 2):
        h = F.max_pool2d(F.relu(F.conv2d(h, w[i], w[i + 1])), 2)
    h = h.flatten(1)
    for i in (4, 6):
        h = F.relu(F.linear(h, w[i], w[i + 1]))
    loss = F.cross_entropy(F.linear(h, w[8], w[9]), torch.from_numpy(labels.astype(np.int64)))
    assert first[0] == pytest.approx(float(loss), rel=1e-5)
