"""One training step (zero the gradients, forward, criterion, backward, SGD update) of an MLP
784-512-512-10 and of a LeNet-5 on 28x28 inputs, float32, luabridge's Lua nn against PyTorch
CPU eager with the same thread count.

    python bench/nn_models.py [--quick] [--threads N]

luabridge runs legacy-style Lua (the model from examples/models/lenet.lua, the step loop in Lua);
PyTorch runs the same layers with torch.optim.SGD. Both use as many threads as numpy's OpenBLAS
(which luabridge calls): torch.set_num_threads is set to match. Each figure is the best of several
repeats, per step. ratio = PyTorch time / luabridge time: above 1 luabridge is faster.
PyTorch rows are skipped with a note when torch is not installed.
"""
from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

import luabridge

ROOT = Path(__file__).resolve().parent.parent
LENET = ROOT / "examples" / "models" / "lenet.lua"

# a function running reps training steps of the model named `name` on (x, y)
LUA_STEPS = r"""
local lenetFile, name, x, y, lr = ...
local models = {
  mlp = function()
    return nn.Sequential()
      :add(nn.Linear(784, 512)):add(nn.ReLU())
      :add(nn.Linear(512, 512)):add(nn.ReLU())
      :add(nn.Linear(512, 10)):add(nn.LogSoftMax())
  end,
  lenet = function() return dofile(lenetFile){ size = 28 } end,
}
local model = models[name]():float()
local criterion = nn.ClassNLLCriterion():float()
local params, grads = model:getParameters()
return function(reps)
  for _ = 1, reps do
    grads:zero()
    local output = model:forward(x)
    criterion:forward(output, y)
    model:backward(x, criterion:backward(output, y))
    params:add(-lr, grads)
  end
end
"""

SHAPES = {"mlp": (784,), "lenet": (1, 28, 28)}


def blas_threads() -> int:
    """The thread count of the BLAS numpy links (the one luabridge calls)."""
    try:
        from threadpoolctl import threadpool_info

        blas = [i for i in threadpool_info() if i.get("user_api") == "blas"]
        blas.sort(key=lambda i: "numpy" not in i.get("filepath", ""))  # numpy's own first
        if blas:
            return int(blas[0]["num_threads"])
    except ImportError:
        pass
    return int(os.environ.get("OPENBLAS_NUM_THREADS", os.cpu_count() or 1))


def best_time(step: Callable[[int], Any], reps: int, repeats: int) -> float:
    """Best seconds per step over `repeats` runs of `reps` steps, after a warm-up run."""
    step(max(1, reps // 2))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        step(reps)
        times.append((time.perf_counter() - t0) / reps)
    return min(times)


def luabridge_step(name: str, x: np.ndarray, y: np.ndarray) -> Callable[[int], Any]:
    luabridge.require("nn")
    return luabridge.runtime().execute(LUA_STEPS, str(LENET), name, luabridge.from_numpy(x),
                                       luabridge.from_numpy(y), 0.01)


def torch_step(name: str, x: np.ndarray, y: np.ndarray) -> Callable[[int], Any]:
    import torch
    from torch import nn

    if name == "mlp":
        model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                              nn.Linear(512, 10), nn.LogSoftmax(dim=1))
    else:
        model = nn.Sequential(nn.Conv2d(1, 6, 5), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                              nn.Linear(256, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
                              nn.Linear(84, 10), nn.LogSoftmax(dim=1))
    criterion = nn.NLLLoss()
    sgd = torch.optim.SGD(model.parameters(), lr=0.01)
    tx, ty = torch.from_numpy(x), torch.from_numpy(y - 1)

    def steps(reps: int) -> None:
        for _ in range(reps):
            sgd.zero_grad()
            criterion(model(tx), ty).backward()
            sgd.step()

    return steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--threads", type=int, default=0, help="BLAS and PyTorch threads (default: OpenBLAS's)")
    args = parser.parse_args()
    if args.threads:
        from threadpoolctl import threadpool_limits

        threadpool_limits(args.threads, user_api="blas")
    threads = args.threads or blas_threads()
    try:
        import torch

        torch.set_num_threads(threads)
        torch_note = f"PyTorch {torch.__version__}, {torch.get_num_threads()} threads"
    except ImportError:
        torch = None
        torch_note = "PyTorch not installed: its rows are skipped (pip install torch)"
    print(f"{platform.machine()} {platform.processor() or ''}, {os.cpu_count()} CPUs; "
          f"OpenBLAS (numpy's) {threads} threads; {torch_note}")
    print("one training step (forward, backward, SGD update), float32, best per step")
    print(f"{'model':<8}{'batch':>6}{'luabridge ms':>15}{'PyTorch ms':>13}{'ratio':>8}")
    repeats = 3 if args.quick else 5
    rng = np.random.default_rng(0)
    for name in ("mlp", "lenet"):
        for batch in (64, 256):
            x = rng.standard_normal((batch, *SHAPES[name])).astype(np.float32)
            y = rng.integers(1, 11, batch).astype(np.int64)
            reps = max(2, (40 if name == "mlp" else 20) * 64 // batch // (2 if args.quick else 1))
            ours = best_time(luabridge_step(name, x, y), reps, repeats)
            row = f"{name:<8}{batch:>6}{1e3 * ours:>15.2f}"
            if torch is not None:
                theirs = best_time(torch_step(name, x, y), reps, repeats)
                row += f"{1e3 * theirs:>13.2f}{theirs / ours:>8.2f}"
            else:
                row += f"{'-':>13}{'-':>8}"
            print(row, flush=True)


if __name__ == "__main__":
    main()
