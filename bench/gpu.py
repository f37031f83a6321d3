"""luabridge's CUDA backend against PyTorch CUDA: training steps of LeNet and ResNet-18 (the
models of bench/real_models.lua and their PyTorch twins, with the same weights) and a few tensor
ops, in milliseconds per step, as a Markdown table.

    python bench/gpu.py [--quick] [--json FILE] [--smoke]

Needs CuPy and a CUDA device (PyTorch CUDA for its column; without it that column is empty). On
a machine without a device it says so and exits 0. Each timing synchronizes the device before
the clock stops. --smoke runs every row once with numpy standing in for CuPy and PyTorch on the
CPU (a check that the bench itself works; its times mean nothing).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import real_models  # noqa: E402  (the models, their twins and weight copying)

import luabridge  # noqa: E402
from luabridge.providers.torch_cuda import arrays as cuda  # noqa: E402

LUA_TRAINER = r"""
local path, lr = ...
local models = dofile(path)
-- models.trainer's SGD steps, with the model, criterion and batch on the device
return function(model, criterion, x, y)
  local step = models.trainer(model:cuda(), nn[criterion]():cuda(), x:cuda(), y:cudaLong(), lr)
  return step, function() return model:forward(x:cuda()):float() end
end
"""

LUA_OPS = r"""
local n, m = ...
local a, b = torch.CudaTensor(n, n):normal(), torch.CudaTensor(n, n):normal()
local r = torch.CudaTensor(n, n)
local u, v = torch.CudaTensor(m):uniform(), torch.CudaTensor(m):uniform()
local w = torch.CudaTensor(m)
local rows = torch.CudaTensor(m / 1000, 1000):normal()
local sm = torch.CudaTensor(m / 1000, 1000)
return {
  mm = function(reps) for _ = 1, reps do r:mm(a, b) end end,
  add = function(reps) for _ = 1, reps do w:add(u, 2, v) end end,
  sum = function(reps) for _ = 1, reps do u:sum() end end,
  softmax = function(reps)
    for _ = 1, reps do sm:exp(rows); sm:cdiv(torch.sum(sm, 2):expandAs(sm)) end
  end,
}
"""


def device_or_reason() -> tuple[Optional[Any], str]:
    """(cupy, its device's name), or (None, why there is none)."""
    try:
        import cupy
        if cupy.cuda.runtime.getDeviceCount() == 0:
            return None, "CuPy sees no CUDA device"
    except Exception as e:   # ImportError, or CuPy's runtime error without a driver
        return None, f"no CUDA device ({type(e).__name__}: {str(e).splitlines()[0]})"
    name = cupy.cuda.runtime.getDeviceProperties(0)["name"]
    return cupy, name.decode() if isinstance(name, bytes) else str(name)


def torch_cuda(smoke: bool) -> Optional[Any]:
    """torch when it has a CUDA device (or, for --smoke, torch on the CPU); else None."""
    try:
        import torch
    except ImportError:
        return None
    return torch if smoke or torch.cuda.is_available() else None


def timed(step: Callable[[int], Any], sync: Callable[[], None], reps: int, repeats: int) -> float:
    """Best milliseconds per step over `repeats` runs of `reps`, after a warm-up run."""
    step(max(1, reps // 2))
    sync()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        step(reps)
        sync()
        best = min(best, (time.perf_counter() - t0) / reps)
    return best * 1e3


def model_rows(torch: Optional[Any], device: str, batches: dict[str, int]) -> list[tuple[str, Any, Any, float]]:
    """(label, our step, PyTorch's step or None, |first loss difference|) for each model."""
    trainer = luabridge.runtime().execute(LUA_TRAINER, str(real_models.MODELS), real_models.LR)
    rows = []
    rng = np.random.default_rng(0)
    for name, batch in batches.items():
        row = real_models.Row(name, "", name, batch, "train")
        x, y = real_models.row_data(row, rng)
        ours, twin = real_models.pair(name)
        lua_criterion, torch_criterion = real_models.CRITERIA[name]
        ours_step, forward = trainer(ours, lua_criterion, luabridge.from_numpy(x), luabridge.from_numpy(y))
        theirs, gap = None, float("nan")
        if torch is not None:
            twin = twin.to(device)
            twin.train()   # as ours: the trainer put it in training mode (batch statistics)
            with torch.no_grad():
                gap = float(np.abs(luabridge.to_numpy(forward()) - twin(torch.from_numpy(x).to(device)).cpu().numpy()).max())
            theirs = real_models.nn_models.torch_train_steps(
                twin, getattr(torch.nn, torch_criterion)(), torch.from_numpy(x).to(device),
                torch.from_numpy(y - 1).to(device), real_models.LR)
        side = "x".join(str(s) for s in real_models.INPUTS[name][1:])
        rows.append((f"{name} training step, batch {batch} ({side})", ours_step, theirs, gap))
    return rows


def op_rows(torch: Optional[Any], device: str, n: int, m: int) -> list[tuple[str, Any, Any, float]]:
    ours = luabridge.runtime().execute(LUA_OPS, n, m)
    theirs: dict[str, Any] = {}
    if torch is not None:
        a, b = torch.randn(n, n, device=device), torch.randn(n, n, device=device)
        u, v = torch.rand(m, device=device), torch.rand(m, device=device)
        rows = torch.randn(m // 1000, 1000, device=device)

        def repeat(f: Callable[[], Any]) -> Callable[[int], None]:
            return lambda reps: [f() for _ in range(reps)] and None
        theirs = {"mm": repeat(lambda: a @ b), "add": repeat(lambda: u + 2 * v), "sum": repeat(u.sum),
                  "softmax": repeat(lambda: torch.softmax(rows, 1))}
    labels = {"mm": f"mm {n}x{n}", "add": f"add (a + 2b), {m:.0e} floats", "sum": f"sum, {m:.0e} floats",
              "softmax": f"softmax of {m // 1000} rows of 1000"}
    return [(labels[k], ours[k], theirs.get(k), float("nan")) for k in labels]


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (bench/device_check.sh)")
    parser.add_argument("--smoke", action="store_true", help="numpy standing in, PyTorch on the CPU, one step")
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args(argv)
    if args.smoke:
        xp, name, device = np, "numpy standing in for CuPy (--smoke: times mean nothing)", "cpu"
    else:
        xp, name = device_or_reason()
        device = "cuda"
        if xp is None:
            print(f"bench/gpu.py: {name}; nothing to measure (needs CuPy and a CUDA GPU)")
            return 0
    cuda.use_array_module(xp)
    luabridge.require("nn")
    torch = torch_cuda(args.smoke)

    def sync() -> None:
        if xp is not np:
            xp.cuda.Device().synchronize()
        if torch is not None and device == "cuda":
            torch.cuda.synchronize()

    reps, repeats = (1, 1) if args.smoke else (3, 2) if args.quick else (10, 3)
    batches = {"lenet": 4, "resnet18": 1} if args.smoke else {"lenet": 64, "resnet18": 16}
    rows = model_rows(torch, device, batches) + op_rows(torch, device, *((64, 10_000) if args.smoke else (4096, 10_000_000)))
    print(f"luabridge CUDA ({name}) vs PyTorch {'CUDA' if device == 'cuda' else 'CPU'}"
          + ("" if torch is not None else " (PyTorch CUDA absent: its column is empty)"))
    print("\n| step | luabridge ms | PyTorch ms | ratio | max output difference |\n|---|---:|---:|---:|---:|")
    results = []
    for label, ours, theirs, gap in rows:
        ms = timed(ours, sync, reps, repeats)
        tms = timed(theirs, sync, reps, repeats) if theirs is not None else float("nan")
        results.append({"step": label, "luabridge_ms": ms, "pytorch_ms": tms, "max_output_difference": gap})
        gap_text = "" if np.isnan(gap) else f"{gap:.1e}"
        print(f"| {label} | {ms:.2f} | {tms:.2f} | {ms / tms:.1f}x | {gap_text} |", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"device": name, "rows": results}, indent=1))
    cuda.use_array_module(None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
