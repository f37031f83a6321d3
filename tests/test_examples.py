"""The examples run: the custom Lua layer used from Python, a short digits training run, and the
checkpoint round trip (saved, loaded in new processes)."""
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import luabridge

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def test_custom_layer_example():
    run = subprocess.run([sys.executable, str(EXAMPLES / "custom_layer.py")],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    gap = float(re.search(r"largest difference (\S+)", run.stdout).group(1))
    before, after = map(float, re.search(r"MSE: (\S+) before, (\S+) after", run.stdout).groups())
    assert gap < 1e-6 and after < before / 10
    assert "(2): nn.MyLayer(slope" in run.stdout


def test_train_digits_short_run(capsys, tmp_path):
    pytest.importorskip("sklearn")
    pytest.importorskip("tqdm")
    spec = importlib.util.spec_from_file_location("train_digits", EXAMPLES / "train_digits.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    saved = tmp_path / "lenet.t7"
    accuracy = module.main(["--steps", "25", "--epochs", "1", "--save", str(saved)])
    out = capsys.readouterr().out
    assert accuracy > 0.5  # chance is 0.1
    assert "nn.SpatialConvolution(1 -> 6, 5x5)" in out
    # optim's ConfusionMatrix counts the same predictions as numpy's argmax
    global_correct = float(re.search(r"global correct: ([\d.]+)%", out).group(1))
    assert global_correct == pytest.approx(100 * accuracy, abs=1e-6)
    # the trained model is saved as a Torch7 file: 13 modules, the convolutions' weights inside
    assert f"saved the trained model to {saved}" in out
    model = luabridge.t7.read(saved)
    assert model.typename == "nn.Sequential" and len(model.modules) == 13
    assert model.modules[0].weight.shape == (6, 1, 5, 5) and model.modules[0].weight.dtype == np.float32


def test_checkpoint_example(tmp_path):
    """Saved, then loaded in two new processes (Python, luabridge th): the same predictions."""
    pytest.importorskip("sklearn")
    pytest.importorskip("tqdm")
    saved = tmp_path / "checkpoint.t7"
    run = subprocess.run([sys.executable, str(EXAMPLES / "checkpoint.py"), "--epochs", "1", "--steps", "10",
                          "--size", "16", "--out", str(saved)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    for who in ("new Python process:", "luabridge th:"):
        found = re.search(rf"^{who} +450 predictions identical \(log-probabilities (.*)\)$", run.stdout, re.M)
        assert found, run.stdout
        assert found.group(1) == "bit-identical" or float(found.group(1).split()[-1]) < 1e-5
    assert "predictions identical in all three processes" in run.stdout
    # an independent reader (the torchfile package) sees the same weights in the file
    torchfile = pytest.importorskip("torchfile")
    ours, theirs = luabridge.t7.read(saved), torchfile.load(str(saved))
    assert theirs.torch_typename() == b"nn.Sequential"
    for i in (0, 3, 7, 9, 11):  # convolutions and linear layers
        np.testing.assert_array_equal(theirs["modules"][i]["weight"], ours.modules[i].weight)
        np.testing.assert_array_equal(theirs["modules"][i]["bias"], ours.modules[i].bias)


def _example(name: str):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_tinyflow_softmax_example(capsys):
    """tinyflow's MNIST softmax tutorial, on the digits, through luabridge.tinyflow."""
    pytest.importorskip("sklearn")
    accuracy = _example("tinyflow_softmax").main(["--steps", "200"])
    assert accuracy >= 0.85
    assert re.search(r"test accuracy [\d.]+% \(450 images\)", capsys.readouterr().out)


def test_tinyflow_lenet_example_short_run(capsys):
    """tinyflow's LeNet example (shape inference, Adam, nn modules) for a few epochs."""
    pytest.importorskip("sklearn")
    accuracy = _example("tinyflow_lenet").main(["--epochs", "4"])
    out = capsys.readouterr().out
    assert "shape[conv1_weight]=[20, 1, 5, 5]" in out and "shape[fc2_weight]=[10, 100]" in out
    losses = [float(v) for v in re.findall(r"cross_entropy=(\S+)", out)]
    assert len(losses) == 4 and losses[-1] < losses[0] / 2
    assert accuracy > 0.8  # chance is 0.1; the full run (10 epochs) reaches about 97%


def test_mixed_graph_example_short_run(capsys, rng):
    """A Lua module (with a torch.class layer), a numpy op and tinyflow ops in one graph, trained."""
    pytest.importorskip("sklearn")
    module = _example("mixed_graph")
    accuracy = module.main(["--steps", "120", "--log", "40"])
    out = capsys.readouterr().out
    assert "graph inputs: lua_param1, lua_param2, lua_param3, W" in out
    losses = [float(v) for v in re.findall(r"step \d+: loss (\S+)", out)]
    assert len(losses) == 3 and losses[-1] < losses[0] / 2
    slope = float(re.search(r"learned MyLayer slope (\S+);?", out).group(1))
    assert slope != 1.0  # the Lua layer's own parameter (initially 1) was trained through the graph
    assert accuracy > 0.85  # chance is 0.1; 300 steps reach about 97%
    # the numpy op's hand-written gradient against central differences of its forward
    h, g = rng.standard_normal((3, 7)), rng.standard_normal((3, 7))
    got = module.standardise_grad([h], [module.standardise(h)], [g])[0]
    eps, want = 1e-6, np.zeros_like(h)
    for idx in np.ndindex(h.shape):
        d = np.zeros_like(h)
        d[idx] = eps
        want[idx] = ((module.standardise(h + d) - module.standardise(h - d)) * g).sum() / (2 * eps)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
