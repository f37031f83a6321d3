"""Smoke tests of bench/real_models.py: each model it times computes what its PyTorch twin
computes from the same weights, forward and through a training step, at small sizes where the
model allows (no timing asserts)."""
import numpy as np
import pytest

import luabridge
from helpers import load_bench

torch = pytest.importorskip("torch", reason="the twins are PyTorch models (pip install torch)")

@pytest.fixture(scope="module")
def bench():
    torch.manual_seed(0)
    module = load_bench("real_models.py", "bench_real_models")
    module.lua()   # requires nn
    ours, theirs = luabridge.eval("torch.getnumthreads()"), torch.get_num_threads()
    module.set_threads(1)   # threads waiting on each other crawl on a loaded test machine
    yield module
    module.lua().setThreads(ours)
    torch.set_num_threads(theirs)


def lua_forward(model, x: np.ndarray, train: bool) -> np.ndarray:
    out = luabridge.runtime().execute(
        "local m, x, train = ...\n"
        "if train then m:training() else m:evaluate() end\n"
        "return m:forward(x)", model, luabridge.from_numpy(x), train)
    return np.array(luabridge.to_numpy(out))


def twin_forward(twin, x: np.ndarray, train: bool) -> np.ndarray:
    twin.train(train)
    with torch.no_grad():
        return twin(torch.from_numpy(x)).numpy()


def parameters(bench, ours, twin, name):
    """Our parameters and the twin's, as pairs of float64 arrays."""
    return [(np.array(luabridge.to_numpy(a), dtype=np.float64), b.detach().numpy().astype(np.float64))
            for a, b in bench.parameter_pairs(ours, twin, name)]


@pytest.mark.parametrize("name, sizes, shape, train", [
    ("lenet", {}, (4, 1, 28, 28), False),
    ("vgg", {}, (2, 3, 32, 32), True),       # batch statistics (dropout off: eval's masks differ)
    ("dcgan", {"ngf": 8}, (4, 100, 1, 1), True),
    ("resnet18", {}, (1, 3, 224, 224), False),
])
def test_models_compute_what_their_pytorch_twins_compute(bench, name, sizes, shape, train):
    ours, twin = bench.pair(name, sizes)
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    if name == "vgg" and train:   # batch norm in training mode, dropout off on both sides
        luabridge.runtime().execute(
            "local m = ...\nfor _, d in ipairs(m:findModules('nn.Dropout')) do d.p = 0 end", ours)
        for module in twin.modules():
            if isinstance(module, torch.nn.Dropout):
                module.p = 0.0
    got, want = lua_forward(ours, x, train), twin_forward(twin, x, train)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_lstm_step_graph_matches_the_char_rnn_cell(bench):
    ours, twin = bench.pair("lstm", {"vocab": 7, "hidden": 5, "layers": 2})
    rng = np.random.default_rng(2)
    x = rng.integers(1, 8, 3)
    state = [rng.standard_normal((3, 5)).astype(np.float32) for _ in range(4)]
    out = luabridge.runtime().execute("local m, x, a, b, c, d = ...\nreturn m:forward{x, a, b, c, d}", ours,
                                      luabridge.from_numpy(x), *[luabridge.from_numpy(s) for s in state])
    new, logp = twin(torch.from_numpy(x - 1), [torch.from_numpy(s) for s in state])
    for i, want in enumerate([*new, logp]):
        np.testing.assert_allclose(np.array(luabridge.to_numpy(out[i + 1])), want.detach().numpy(),
                                   rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name, sizes, batch", [
    ("lenet", {}, 4),
    ("lstm", {"vocab": 7, "hidden": 5, "layers": 2}, 3),
])
def test_a_training_step_updates_the_weights_as_pytorch_does(bench, name, sizes, batch):
    ours, twin = bench.pair(name, sizes)
    rng = np.random.default_rng(3)
    if name == "lstm":
        x = rng.integers(1, sizes["vocab"] + 1, (4, batch))
        y = rng.integers(1, sizes["vocab"] + 1, (4, batch))
    else:
        x = rng.standard_normal((batch, 1, 28, 28)).astype(np.float32)
        y = rng.integers(1, 11, batch).astype(np.int64)
    before = parameters(bench, ours, twin, name)
    ours_step, twin_step = bench.steps_pair(bench.Row(name, name, name, batch, "train"), x, y, (ours, twin))
    ours_step(1)
    twin_step(1)
    after = parameters(bench, ours, twin, name)
    moved = max(np.abs(b - a).max() for (a, _), (b, _) in zip(before, after))
    assert moved > 1e-4   # the step did change the weights
    for got, want in after:
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_flops_count_the_lenet_forward_by_hand(bench):
    ours, twin = bench.pair("lenet")
    x, y = np.zeros((2, 1, 28, 28), np.float32), np.ones(2, np.int64)
    _, twin_steps = bench.steps_pair(bench.Row("lenet", "lenet", "lenet", 2, "eval"), x, y, (ours, twin))
    # multiply-adds of each layer: conv1 20x(1x5x5) at 24x24, conv2 50x(20x5x5) at 8x8, fc 800x500, 500x10
    per_image = 20 * 25 * 24 * 24 + 50 * 20 * 25 * 8 * 8 + 800 * 500 + 500 * 10
    assert bench.flops(twin_steps) == 2 * 2 * per_image
