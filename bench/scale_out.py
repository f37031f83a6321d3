"""Scale-out on Ray, measured on this machine (`ray.init(num_cpus=2)`): batch inference with
luabridge.ray.Predictor and data-parallel training with luabridge.ray.fit, against one process.

    python bench/scale_out.py [--quick] [--images N] [--steps S]

- inference: images/s of a small convnet (examples/ray_inference.py's) and of the LeNet demo
  model (examples/models/lenet.lua, 28x28), float32, batches of 256: model.predict in this process
  (1 BLAS thread), then Ray Data with 1 and 2 Predictor actors of 1 CPU each. A Ray rate is the
  steady one: rows after the first batch reached this process, over the time from it to the
  last (the actors' start-up, shown apart, is left out).
- per-batch overhead: the Ray path's seconds per batch (1 actor, steady) less predict's in this
  process, at batches of 32, 256 and 1024 (convnet).
- training: LeNet steps (ClassNLLCriterion, SGD) at a global batch of 128: a Lua loop in this
  process (1 thread), then luabridge.ray.fit with 1 and 2 workers (the median time between
  steps, first steps left out), and the bytes each step moves (a gradient per worker to the
  driver, the average back).
Ratios are against this process and against 1 worker. On a machine shared with other work the
2-worker figures say little: rerun it idle.
"""
from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import ray

import luabridge
import luabridge.ray
from nn_models import luabridge_step

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
from ray_inference import CONVNET  # noqa: E402

LENET = f"""
local lenet = dofile('lenet.lua')
torch.manualSeed(1)
return lenet{{ size = 28 }}:float()
"""
BATCH, TRAIN_BATCH, LR = 256, 128, 0.01
OVERHEAD_BATCHES = (32, BATCH, 1024)
BLOCK = 4 * BATCH   # images per Ray block: blocks are what the actors share out


def models() -> dict[str, luabridge.Model]:
    lenet_file = (ROOT / "examples" / "models" / "lenet.lua").read_text()
    return {"convnet": luabridge.Model.from_lua(CONVNET),
            "LeNet": luabridge.Model.from_lua(LENET, files={"lenet.lua": lenet_file})}


def parameter_bytes(model: luabridge.Model) -> int:
    return sum(a.nbytes for a in model.state().values())


def predict_rate(model: luabridge.Model, x: np.ndarray, batch: int) -> float:
    """Images/s of model.predict in this process on batches of `batch`: one pass over x after a
    warm-up, an average as the Ray rates are (a best-of would favour it on a busy machine)."""
    batches = [x[s:s + batch] for s in range(0, len(x), batch)]
    model.predict(batches[0])
    start = time.perf_counter()
    for b in batches:
        model.predict(b)
    return len(x) / (time.perf_counter() - start)


def ray_rate(model: luabridge.Model, x: np.ndarray, batch: int, workers: int) -> tuple[float, float]:
    """(steady images/s, seconds to the first batch) of Predictor on `workers` actors."""
    ds = ray.data.from_numpy([x[s:s + BLOCK] for s in range(0, len(x), BLOCK)])
    mapped = ds.map_batches(luabridge.ray.Predictor, fn_constructor_kwargs={"model": model, "input": "data"},
                            batch_format="numpy", batch_size=batch,
                            compute=ray.data.ActorPoolStrategy(size=workers))
    start = time.perf_counter()
    first_at, first_rows, rows = 0.0, 0, 0
    for out in mapped.iter_batches(batch_size=None, batch_format="numpy"):
        rows += len(out["output"])
        if not first_at:
            first_at, first_rows = time.perf_counter(), rows
    end = time.perf_counter()
    return (rows - first_rows) / (end - first_at), first_at - start


def fit_step_time(model: luabridge.Model, x: np.ndarray, y: np.ndarray, workers: int, skip: int = 3) -> float:
    """Median seconds between luabridge.ray.fit's steps (after the first `skip`)."""
    ds = ray.data.from_items([{"input": xi, "target": yi} for xi, yi in zip(x, y)])
    stamps: list[float] = []
    luabridge.ray.fit(model, "nn.ClassNLLCriterion():float()", ds, workers=workers,
                      batch_size=TRAIN_BATCH, optim="sgd", config={"learningRate": LR},
                      on_step=lambda epoch, step, loss: stamps.append(time.perf_counter()))
    return statistics.median(np.diff(stamps[skip:]))


def median_step(step: Callable[[int], Any], steps: int, skip: int = 3) -> float:
    """Median seconds of one call step(1), over `steps` calls after `skip` warm-up ones."""
    step(skip)
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step(1)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def row(*cells: Any) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer images and steps")
    parser.add_argument("--images", type=int, default=24576)
    parser.add_argument("--steps", type=int, default=40)
    args = parser.parse_args()
    images = 8192 if args.quick else args.images
    steps = 15 if args.quick else args.steps

    luabridge.require("torch").setnumthreads(1)   # as each 1-CPU actor runs
    rng = np.random.default_rng(0)
    x = rng.standard_normal((images, 1, 28, 28)).astype(np.float32)
    nets = models()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    logging.getLogger("ray.data").setLevel(logging.WARNING)

    print(f"load average before: {Path('/proc/loadavg').read_text().split()[0]} on {os.cpu_count()} CPUs\n")
    print(f"## Inference: images/s, batches of {BATCH}, float32 ({images} images per Ray run)\n")
    print(row("model", "parameters", "one process", "Ray, 1 worker", "Ray, 2 workers",
              "2 workers / 1", "1 worker / one process", "actors' start-up"))
    print(row(*["---"] * 8))
    one_worker: dict[str, float] = {}
    in_process: dict[str, float] = {}
    for name, model in nets.items():
        local = in_process[name] = predict_rate(model, x, BATCH)
        (r1, s1), (r2, s2) = (ray_rate(model, x, BATCH, w) for w in (1, 2))
        one_worker[name] = r1
        print(row(name, f"{parameter_bytes(model) // 4} ({parameter_bytes(model) / 1024:.0f} KiB)",
                  f"{local:.0f}", f"{r1:.0f}", f"{r2:.0f}", f"{r2 / r1:.2f}", f"{r1 / local:.2f}",
                  f"{s1:.1f} s, {s2:.1f} s"))

    print("\n## Per-batch overhead of the Ray path (convnet, 1 worker, steady)\n")
    print(row("batch", "predict in one process", "Ray, per batch", "overhead", "overhead / predict"))
    print(row(*["---"] * 5))
    model = nets["convnet"]
    for batch in OVERHEAD_BATCHES:
        local = batch / (in_process["convnet"] if batch == BATCH else predict_rate(model, x, batch))
        remote = batch / (one_worker["convnet"] if batch == BATCH else ray_rate(model, x, batch, 1)[0])
        print(row(batch, f"{local * 1e3:.2f} ms", f"{remote * 1e3:.2f} ms", f"{(remote - local) * 1e3:.2f} ms",
                  f"{(remote - local) / local:.0%}"))

    print(f"\n## Training: LeNet step time, global batch {TRAIN_BATCH}, SGD ({steps} steps)\n")
    lenet = nets["LeNet"]
    xt = x[:TRAIN_BATCH * steps]
    yt = rng.integers(1, 11, len(xt)).astype(np.int64)
    local = median_step(luabridge_step("lenet", xt[:TRAIN_BATCH].copy(), yt[:TRAIN_BATCH].copy(), False), steps)
    t1, t2 = (fit_step_time(lenet, xt, yt, w) for w in (1, 2))
    gradient = parameter_bytes(lenet)
    print(row("one process", "fit, 1 worker", "fit, 2 workers", "2 workers / 1", "1 worker - one process",
              "moved per step, 2 workers"))
    print(row(*["---"] * 6))
    print(row(f"{local * 1e3:.1f} ms", f"{t1 * 1e3:.1f} ms", f"{t2 * 1e3:.1f} ms", f"{t2 / t1:.2f}",
              f"{(t1 - local) * 1e3:.1f} ms", f"{2 * 2 * gradient / 1024:.0f} KiB"))
    per_sample, overhead = local / TRAIN_BATCH, t1 - local
    print(f"\nFor N workers: per-sample compute {per_sample * 1e6:.0f} µs (1 thread); per-step cost of "
          f"the Ray path {overhead * 1e3:.1f} ms; each step the driver takes in N gradients and sends "
          f"the average to N workers, {2 * gradient / 1024:.0f} KiB x N. A worker's shard computes "
          f"as long as that cost from {overhead / per_sample:.0f} samples, 4 times as long from "
          f"{4 * overhead / per_sample:.0f}: a global batch of that many times N keeps N workers busy.")
    ray.shutdown()


if __name__ == "__main__":
    main()
