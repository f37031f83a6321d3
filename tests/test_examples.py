"""The examples run: the custom Lua layer used from Python, and a short digits training run."""
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def test_custom_layer_example():
    run = subprocess.run([sys.executable, str(EXAMPLES / "custom_layer.py")],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    gap = float(re.search(r"largest difference (\S+)", run.stdout).group(1))
    before, after = map(float, re.search(r"MSE: (\S+) before, (\S+) after", run.stdout).groups())
    assert gap < 1e-6 and after < before / 10
    assert "(2): nn.MyLayer(slope" in run.stdout


def test_train_digits_short_run(capsys):
    pytest.importorskip("sklearn")
    pytest.importorskip("tqdm")
    spec = importlib.util.spec_from_file_location("train_digits", EXAMPLES / "train_digits.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    accuracy = module.main(["--steps", "25", "--epochs", "1"])
    out = capsys.readouterr().out
    assert accuracy > 0.5  # chance is 0.1
    assert "nn.SpatialConvolution(1 -> 6, 5x5)" in out
    # optim's ConfusionMatrix counts the same predictions as numpy's argmax
    global_correct = float(re.search(r"global correct: ([\d.]+)%", out).group(1))
    assert global_correct == pytest.approx(100 * accuracy, abs=1e-6)
