"""Checkpoints: train the digits LeNet of examples/train_digits.py, save it with luabridge.save
(Lua's torch.save) to a .t7 file, load it back in new processes, from Python with luabridge.load
and from Lua with `luabridge th`, and check that both predict exactly what the model predicted
before it was saved.

    python examples/checkpoint.py [--epochs 2] [--steps N] [--out lenet_checkpoint.t7]
    python examples/checkpoint.py --predict MODEL.t7 INPUTS.t7 OUTPUTS.t7   (the Python side)

The test images travel as a .t7 file too (a numpy array saved as a FloatTensor); each new
process saves its log-probabilities to a .t7 file that this one reads with luabridge.t7.read,
which runs no Lua at all.
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

import luabridge
import train_digits  # this file's directory is on sys.path when it runs as a script

# What a Torch7 user runs: `luabridge th predict.lua MODEL.t7 INPUTS.t7 OUTPUTS.t7`.
PREDICT_LUA = """\
require 'nn'
local model = torch.load(arg[1])
local images = torch.load(arg[2])
model:evaluate()
local output = model:forward(images)
torch.save(arg[3], output)
local _, classes = output:max(2)
print('predictions ' .. table.concat(classes:view(-1):add(-1):totable()))
"""


def digits(output: np.ndarray) -> str:
    """The predicted digit of each row of log-probabilities, as one string."""
    return "".join(str(d) for d in output.argmax(1))


def predict(model_path: str, inputs_path: str, outputs_path: str) -> None:
    """The new Python process: load the model and the images, predict, save the outputs."""
    model = luabridge.load(model_path)  # requires nn for the classes the file names
    images = luabridge.load(inputs_path)
    model.evaluate()
    output = model.forward(images)
    luabridge.save(outputs_path, output)
    print("predictions", digits(np.asarray(output)))


def run(command: list[str]) -> str:
    """The predictions a child process printed (it must succeed)."""
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stdout}{done.stderr}")
    return re.search(r"^predictions (\d*)$", done.stdout, re.M).group(1)


def compare(name: str, expected: np.ndarray, predicted: str, outputs_path: Path) -> bool:
    """Prints how a new process's predictions and outputs compare with the in-process ones;
    True when the predictions (and the printed ones) are the same."""
    output = luabridge.t7.read(outputs_path)
    same = output.shape == expected.shape and predicted == digits(expected) == digits(output)
    gap = float(np.abs(output - expected).max()) if output.shape == expected.shape else float("inf")
    outputs = "bit-identical" if gap == 0 else f"largest difference {gap:g}"
    print(f"{name:<22} {len(predicted)} predictions {'identical' if same else 'DIFFERENT'} "
          f"(log-probabilities {outputs})")
    return same


def main(argv: list[str] | None = None) -> bool:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--steps", type=int, default=0, help="stop training after this many steps (0: all)")
    parser.add_argument("--size", type=int, default=28, help="model input side (16 at least)")
    parser.add_argument("--out", default="lenet_checkpoint.t7", help="the checkpoint file to write")
    parser.add_argument("--predict", nargs=3, metavar=("MODEL", "INPUTS", "OUTPUTS"),
                        help="load MODEL, predict INPUTS, save OUTPUTS (the new process's side)")
    args = parser.parse_args(argv)
    if args.predict:
        predict(*args.predict)
        return True

    train_args = train_digits.parse_args(["--epochs", str(args.epochs), "--steps", str(args.steps),
                                          "--size", str(args.size)])
    model, images, labels = train_digits.fit(train_args)
    model.evaluate()
    expected = np.array(model.forward(images))  # a copy: the next forward reuses model.output
    accuracy = float((expected.argmax(1) + 1 == labels).mean())
    print(f"in this process: test accuracy {100 * accuracy:.2f}% ({len(labels)} images)")
    train_digits.save(model, args.out)

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        luabridge.save(work / "images.t7", images)
        (work / "predict.lua").write_text(PREDICT_LUA)
        files = [args.out, str(work / "images.t7")]
        python = run([sys.executable, __file__, "--predict", *files, str(work / "python.t7")])
        lua = run([sys.executable, "-m", "luabridge", "th", str(work / "predict.lua"), *files,
                   str(work / "lua.t7")])
        ok = compare("new Python process:", expected, python, work / "python.t7")
        ok = compare("luabridge th:", expected, lua, work / "lua.t7") and ok
    size = Path(args.out).stat().st_size
    print(f"checkpoint {args.out} ({size / 1024:.0f} KiB): "
          + ("predictions identical in all three processes" if ok else "MISMATCH"))
    return ok


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
