"""Train a legacy Lua Torch7 LeNet (examples/models/lenet.lua) from Python on scikit-learn's
bundled digits, with torch7's nn and optim running in luabridge's LuaJIT.

    python examples/train_digits.py [--epochs 8] [--optimizer adam|sgd] [--size 28] [--save FILE.t7]

The 8x8 digit images are upsampled and padded to the model's input side (28 by default, as
MNIST). Batches are numpy arrays shared with Lua without a copy; the optim feval is a Python
function. Prints the test accuracy and optim's ConfusionMatrix, then saves the trained model
with torch.save (luabridge.save) to lenet_digits.t7, a file Torch7's torch.load reads too.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from tqdm import tqdm

import luabridge
from luabridge import nn, optim

MODEL_FILE = Path(__file__).resolve().parent / "models" / "lenet.lua"


def load(size: int, seed: int) -> tuple[np.ndarray, ...]:
    """Train/test images (n x 1 x size x size float32, standardised) and 1-based labels."""
    digits = load_digits()
    scale = size // 8
    images = np.kron(digits.images, np.ones((scale, scale))) / 16.0
    before = (size - 8 * scale) // 2
    after = size - 8 * scale - before
    images = np.pad(images, ((0, 0), (before, after), (before, after)))
    images = ((images - images.mean()) / images.std()).astype(np.float32)[:, None]
    labels = digits.target.astype(np.int64) + 1  # torch7 classes count from 1
    return tuple(train_test_split(images, labels, test_size=0.25, random_state=seed, stratify=labels))


def train(model: Any, criterion: Any, x: np.ndarray, y: np.ndarray, args: argparse.Namespace) -> None:
    params, grads = model.getParameters()
    method = getattr(optim, args.optimizer)
    config = {"learningRate": args.lr, **({"momentum": 0.9} if args.optimizer == "sgd" else {})}
    state: dict = {}  # optim's state (moments, counters): the same dict every step
    rng = np.random.default_rng(args.seed)
    steps = 0
    model.training()
    for epoch in range(args.epochs):
        order = rng.permutation(len(x))
        bar = tqdm(range(0, len(x), args.batch), desc=f"epoch {epoch + 1}/{args.epochs}")
        for start in bar:
            batch = order[start:start + args.batch]
            xb, yb = x[batch], y[batch]

            def feval(_params: Any) -> tuple[float, Any]:
                grads.zero()
                output = model.forward(xb)
                loss, _total_weight = criterion.forward(output, yb)  # two results, as in torch7
                model.backward(xb, criterion.backward(output, yb))
                return loss, grads

            _, losses = method(feval, params, config, state)
            bar.set_postfix(loss=f"{losses[0]:.3f}", refresh=False)
            steps += 1
            if args.steps and steps >= args.steps:
                return


def evaluate(model: Any, x: np.ndarray, y: np.ndarray) -> tuple[float, Any]:
    """Accuracy and a ConfusionMatrix over (x, y)."""
    model.evaluate()
    output = model.forward(x)  # model.output: overwritten by the next forward
    accuracy = float((np.asarray(output).argmax(1) + 1 == y).mean())
    matrix = optim.ConfusionMatrix([str(d) for d in range(10)])
    matrix.batchAdd(output, y)
    return accuracy, matrix


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--optimizer", choices=["adam", "sgd"], default="adam")
    parser.add_argument("--lr", type=float, default=None, help="default: 2e-3 (adam), 0.05 (sgd)")
    parser.add_argument("--size", type=int, default=28, help="model input side (16 at least)")
    parser.add_argument("--steps", type=int, default=0, help="stop after this many steps (0: all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--save", default="lenet_digits.t7", help="where to save the trained model ('': don't)")
    args = parser.parse_args(argv)
    args.lr = args.lr or (2e-3 if args.optimizer == "adam" else 0.05)
    return args


def fit(args: argparse.Namespace) -> tuple[Any, np.ndarray, np.ndarray]:
    """A LeNet trained as args say, with the test images and labels."""
    luabridge.require("torch").manualSeed(args.seed)
    x_train, x_test, y_train, y_test = load(args.size, args.seed)
    lenet = luabridge.wrap(luabridge.dofile(MODEL_FILE))
    model = lenet({"size": args.size}).float()
    criterion = nn.ClassNLLCriterion().float()
    print(model)

    start = time.perf_counter()
    train(model, criterion, x_train, y_train, args)
    print(f"trained on {len(y_train)} images in {time.perf_counter() - start:.1f} s")
    return model, x_test, y_test


def save(model: Any, path: str) -> None:
    """Saves the model without its buffers (clearState), as Torch7 checkpoints are written."""
    model.clearState()
    luabridge.save(path, model)
    print(f"saved the trained model to {Path(path).resolve()}")


def main(argv: list[str] | None = None) -> float:
    args = parse_args(argv)
    model, x_test, y_test = fit(args)
    accuracy, matrix = evaluate(model, x_test, y_test)
    print(matrix)
    print(f"test accuracy {100 * accuracy:.2f}% ({len(y_test)} images)")
    if args.save:
        save(model, args.save)
    return accuracy


if __name__ == "__main__":
    main()
