"""One training step (zero the gradients, forward, criterion, backward, SGD update) of an MLP
784-512-512-10 and of a LeNet-5 on 28x28 inputs, float32, luabridge's Lua nn against PyTorch
CPU eager with the same thread count.

    python bench/nn_models.py [--quick] [--threads N] [--input-grad] [--openblas-coretype NAME]

luabridge runs legacy-style Lua (the model from examples/models/lenet.lua, the step loop in Lua);
PyTorch runs the same layers with torch.optim.SGD. Both run N threads (default 1): numpy's
OpenBLAS (which luabridge calls) is limited to N and torch.set_num_threads(N) matches it.
Each figure is the best of several repeats, per step. ratio = PyTorch time / luabridge time:
above 1 luabridge is faster. PyTorch rows are skipped with a note when torch is not installed.

The input batch: PyTorch computes no gradient for a tensor that does not require one, so by
default neither side computes the gradient of the loss with respect to the input batch (the
first layer's updateGradInput, a GEMM as large as its forward one): the Lua model sets that
module's gradInput to nil, which torch7's nn.Linear and nn.SpatialConvolution honour by skipping
it. --input-grad makes both compute it (PyTorch: the input requires grad; Lua: as legacy code
usually runs).

BLAS kernels: the header names the kernel family numpy's OpenBLAS runs, chosen from the CPU or
forced by the environment variable OPENBLAS_CORETYPE (then marked so); PyTorch's own libraries
choose theirs (AVX-512 ones where the CPU has it). The convolutions' GEMMs are small and run
several times faster with AVX-512 kernels: --openblas-coretype NAME (e.g. SkylakeX) reruns the
bench with OPENBLAS_CORETYPE=NAME (read when numpy loads OpenBLAS, hence the rerun).

Threads: the default is 1 because multi-threaded figures are only meaningful on an otherwise idle
machine with N free cores. On a shared 2-core machine, 2 threads made small GEMMs erratic (a
step of 6 to 75 ms, either library): a BLAS worker that is descheduled stalls the whole call.
Both libraries also keep idle worker threads spinning for a while after their last parallel call
(OpenBLAS up to ~0.1 s, OpenMP less), so with N > 1 the bench pauses between the two libraries'
runs to let the other one's workers go to sleep.
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

import luabridge

ROOT = Path(__file__).resolve().parent.parent
LENET = ROOT / "examples" / "models" / "lenet.lua"
STEPS = ROOT / "bench" / "real_models.lua"

# a function running reps training steps of the model named `name` on (x, y): bench/real_models.lua's
LUA_STEPS = r"""
local lenetFile, stepsFile, name, x, y, lr, inputGrad = ...
local models = {
  mlp = function()
    return nn.Sequential()
      :add(nn.Linear(784, 512)):add(nn.ReLU())
      :add(nn.Linear(512, 512)):add(nn.ReLU())
      :add(nn.Linear(512, 10)):add(nn.LogSoftMax())
  end,
  lenet = function() return dofile(lenetFile){ size = 28 } end,
}
return dofile(stepsFile).trainer(models[name]():float(), nn.ClassNLLCriterion():float(), x, y, lr, inputGrad)
"""

SHAPES = {"mlp": (784,), "lenet": (1, 28, 28)}


def numpy_blas() -> dict:
    """threadpoolctl's description of the BLAS numpy links (the one luabridge calls), or {}."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return {}
    blas = [i for i in threadpool_info() if i.get("user_api") == "blas"]
    blas.sort(key=lambda i: "numpy" not in i.get("filepath", ""))  # numpy's own first
    return blas[0] if blas else {}


def blas_threads() -> int:
    """The thread count of the BLAS numpy links."""
    n = numpy_blas().get("num_threads")
    return int(n) if n else int(os.environ.get("OPENBLAS_NUM_THREADS", os.cpu_count() or 1))


def limit_blas_threads(n: int) -> int:
    """Limits numpy's BLAS to n threads (needs threadpoolctl) and luabridge's products to n
    (torch.setnumthreads: each of its BLAS calls sets the library's count); returns the count
    in effect."""
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(n, user_api="blas")
    except ImportError:
        pass
    luabridge.require("torch")
    luabridge.execute(f"torch.setnumthreads({n})")
    return blas_threads()


SETTLE_S = 0.3  # long enough for idle OpenBLAS / OpenMP workers to stop spinning


def best_time(step: Callable[[int], Any], reps: int, repeats: int, threads: int = 1) -> float:
    """Best seconds per step over `repeats` runs of `reps` steps, after a warm-up run (and, with
    several threads, a pause that lets the other library's idle workers go to sleep)."""
    if threads > 1:
        time.sleep(SETTLE_S)
    step(max(1, reps // 2))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        step(reps)
        times.append((time.perf_counter() - t0) / reps)
    return min(times)


def luabridge_step(name: str, x: np.ndarray, y: np.ndarray, input_grad: bool) -> Callable[[int], Any]:
    luabridge.require("nn")
    return luabridge.runtime().execute(LUA_STEPS, str(LENET), str(STEPS), name, luabridge.from_numpy(x),
                                       luabridge.from_numpy(y), 0.01, input_grad)


def torch_step(name: str, x: np.ndarray, y: np.ndarray, input_grad: bool) -> Callable[[int], Any]:
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
    tx, ty = torch.from_numpy(x).requires_grad_(input_grad), torch.from_numpy(y - 1)
    return torch_train_steps(model, nn.NLLLoss(), tx, ty)


def torch_train_steps(model: Any, criterion: Any, x: Any, y: Any, lr: float = 0.01) -> Callable[[int], Any]:
    """A function running reps PyTorch training steps (SGD) of model on (x, y)."""
    import torch

    model.train()
    sgd = torch.optim.SGD(model.parameters(), lr=lr)

    def steps(reps: int) -> None:
        for _ in range(reps):
            sgd.zero_grad()
            criterion(model(x), y).backward()
            sgd.step()

    return steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--threads", type=int, default=1,
                        help="BLAS and PyTorch threads (default 1; see above)")
    parser.add_argument("--input-grad", action="store_true",
                        help="both also compute the gradient of the input batch (see above)")
    parser.add_argument("--openblas-coretype", metavar="NAME",
                        help="OpenBLAS's kernel family (its OPENBLAS_CORETYPE; see above)")
    args = parser.parse_args()
    if args.openblas_coretype and os.environ.get("OPENBLAS_CORETYPE") != args.openblas_coretype:
        os.environ["OPENBLAS_CORETYPE"] = args.openblas_coretype   # read when OpenBLAS loads
        os.execv(sys.executable, [sys.executable, *sys.argv])
    threads = limit_blas_threads(args.threads)
    try:
        import torch

        torch.set_num_threads(threads)
        torch_note = f"PyTorch {torch.__version__}, {torch.get_num_threads()} threads"
    except ImportError:
        torch = None
        torch_note = "PyTorch not installed: its rows are skipped (pip install torch)"
    kernels = numpy_blas().get("architecture")
    print(f"{platform.machine()} {platform.processor() or ''}, {os.cpu_count()} CPUs; "
          f"OpenBLAS (numpy's) {threads} threads{f', {kernels} kernels' if kernels else ''}"
          f"{' (OPENBLAS_CORETYPE)' if os.environ.get('OPENBLAS_CORETYPE') else ''}; {torch_note}")
    print("one training step (forward, backward, SGD update), float32, best per step; gradient of "
          f"the input batch {'computed' if args.input_grad else 'not computed'} on both sides")
    print(f"{'model':<8}{'batch':>6}{'luabridge ms':>15}{'PyTorch ms':>13}{'ratio':>8}")
    repeats = 3 if args.quick else 5
    rng = np.random.default_rng(0)
    for name in ("mlp", "lenet"):
        for batch in (64, 256):
            x = rng.standard_normal((batch, *SHAPES[name])).astype(np.float32)
            y = rng.integers(1, 11, batch).astype(np.int64)
            reps = max(2, (40 if name == "mlp" else 20) * 64 // batch // (2 if args.quick else 1))
            ours = best_time(luabridge_step(name, x, y, args.input_grad), reps, repeats, threads)
            row = f"{name:<8}{batch:>6}{1e3 * ours:>15.2f}"
            if torch is not None:
                theirs = best_time(torch_step(name, x, y, args.input_grad), reps, repeats, threads)
                row += f"{1e3 * theirs:>13.2f}{theirs / ours:>8.2f}"
            else:
                row += f"{'-':>13}{'-':>8}"
            print(row, flush=True)


if __name__ == "__main__":
    main()
