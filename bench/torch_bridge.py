"""luabridge.torch.LuaModule inside a PyTorch training loop: a Lua MLP 784-256-10 and a LeNet-5
(examples/models/lenet.lua, 28x28) at batch 64, float32, against the same model in pure PyTorch
and in pure Lua nn (driven through luabridge), at the default thread count and at 1 thread; a
small model (Linear 32-10, LogSoftMax) shows the fixed cost of a call.

    python bench/torch_bridge.py [--quick] [--threads 1,2]

Rows per model and thread count (best per step over several runs, after a warm-up):
- step: one training step. LuaModule: opt.zero_grad(), the LuaModule forward, F.nll_loss,
  backward, torch.optim.SGD's step. PyTorch: the same with the twin (our weights copied). Lua: a
  Python loop calling one Lua function per step (zeroGradParameters, forward,
  ClassNLLCriterion, backward, updateParameters). step overhead = LuaModule - Lua (this also
  counts PyTorch's loss and optimizer against Lua's).
- call: the module alone, forward and backward given a fixed output gradient. LuaModule:
  m.zero_grad(); m(x).backward(g). Lua's own work: forward and backward in a Lua loop (no Python at all).
  call overhead = LuaModule - Lua's own work; floor: what an autograd.Function that does nothing
  but copy its output and gradients (PyTorch's own cost of a custom Function, with the same
  Parameters) takes on top of that; glue = call overhead - floor.
Like the other benches, it says nothing without an idle machine: on a shared one, rerun it.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np

import luabridge
from nn_models import best_time, limit_blas_threads, torch_train_steps

ROOT = Path(__file__).resolve().parent.parent
LENET = ROOT / "examples" / "models" / "lenet.lua"
BATCH, LR = 64, 0.01

LUA = r"""
local lenetFile = ...
local M = {}
function M.build(name)
  local model
  if name == 'mlp' then
    model = nn.Sequential():add(nn.Linear(784, 256)):add(nn.ReLU()):add(nn.Linear(256, 10)):add(nn.LogSoftMax())
  elseif name == 'small' then
    model = nn.Sequential():add(nn.Linear(32, 10)):add(nn.LogSoftMax())
  else
    model = dofile(lenetFile){ size = 28 }
  end
  return model:float()
end
-- one training step, called from Python
function M.stepper(model, x, y, lr)
  local criterion = nn.ClassNLLCriterion():float()
  return function()
    model:zeroGradParameters()
    local output = model:forward(x)
    criterion:forward(output, y)
    model:backward(x, criterion:backward(output, y))
    model:updateParameters(lr)
  end
end
-- reps forwards and backwards given gradOutput, in Lua
function M.calls(model, x, gradOutput)
  return function(reps)
    for _ = 1, reps do
      model:forward(x)
      model:backward(x, gradOutput)
    end
  end
end
return M
"""


def twin(name: str, lua_model: Any) -> Any:
    """The PyTorch model with the Lua model's layers and a copy of its weights."""
    import torch
    from torch import nn

    if name == "mlp":
        model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10), nn.LogSoftmax(dim=1))
    elif name == "small":
        model = nn.Sequential(nn.Linear(32, 10), nn.LogSoftmax(dim=1))
    else:
        model = nn.Sequential(nn.Conv2d(1, 6, 5), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                              nn.Linear(256, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
                              nn.Linear(84, 10), nn.LogSoftmax(dim=1))
    weights = [luabridge.to_numpy(t) for t in lua_model.parameters()[0]]
    with torch.no_grad():
        for p, w in zip(model.parameters(), weights, strict=True):
            p.copy_(torch.from_numpy(w).reshape(p.shape))
    return model


def repeat(fn: Callable[[], Any]) -> Callable[[int], None]:
    def steps(reps: int) -> None:
        for _ in range(reps):
            fn()

    return steps


def autograd_floor(module: Any, x: Any, output: Any) -> Callable[[], None]:
    """A forward and backward through an autograd.Function that only copies: its output, and a
    gradient for the input and each Parameter (what LuaModule's Function returns)."""
    import torch

    params = tuple(module.parameters())

    class Copies(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any, *ps: Any) -> Any:
            ctx.save_for_backward(x)
            return output.clone()

        @staticmethod
        def backward(ctx: Any, g: Any) -> tuple:
            return (None, *(p.detach().clone() for p in params))

    def run() -> None:
        module.zero_grad()
        torch.autograd.backward(Copies.apply(x, *params), output)

    return run


def measure(name: str, threads: int, quick: bool) -> dict[str, float]:
    import torch
    import torch.nn.functional as F

    from luabridge.torch import LuaModule

    rng = np.random.default_rng(0)
    shape = {"mlp": (BATCH, 784), "small": (BATCH, 32), "lenet": (BATCH, 1, 28, 28)}[name]
    x_np = rng.standard_normal(shape).astype(np.float32)
    y_np = rng.integers(1, 11, BATCH).astype(np.int64)
    helpers = luabridge.runtime().execute(LUA, str(LENET))
    lua_model = luabridge.wrap(helpers.build(name))
    module = LuaModule(lua_model)
    native = twin(name, lua_model)
    x, y = torch.from_numpy(x_np), torch.from_numpy(y_np - 1)
    reps = {"small": 200, "mlp": 20, "lenet": 10}[name] // (4 if quick else 1)   # about 0.1 s a run
    repeats = 3 if quick else 7

    def lua_module_step(model: Any) -> Callable[[int], None]:
        sgd = torch.optim.SGD(model.parameters(), lr=LR)

        def step() -> None:
            sgd.zero_grad()
            F.nll_loss(model(x), y).backward()
            sgd.step()

        return repeat(step)

    lua_x, lua_y = luabridge.from_numpy(x_np), luabridge.from_numpy(y_np.astype(np.float32))
    own = {"luamodule": lua_module_step(module),
           "torch": torch_train_steps(native, torch.nn.NLLLoss(), x, y, LR),
           "lua": repeat(helpers.stepper(lua_model._lua, lua_x, lua_y, LR))}
    times = {k: best_time(f, reps, repeats, threads) for k, f in own.items()}
    g = torch.full((BATCH, 10), 1.0 / BATCH)
    out = module(x).detach()
    call_reps = reps * 5

    def call() -> None:
        module.zero_grad()
        module(x).backward(g)

    times["call"] = best_time(repeat(call), call_reps, repeats, threads)
    times["own"] = best_time(helpers.calls(lua_model._lua, lua_x, luabridge.from_numpy(g.numpy())),
                             call_reps, repeats, threads)
    times["floor"] = best_time(repeat(autograd_floor(module, x, out)), call_reps, repeats, threads)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--threads", default=f"{os.cpu_count()},1",
                        help="thread counts, comma-separated (default: every core, then 1)")
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        print("PyTorch is not installed: nothing to compare (pip install torch)")
        return
    luabridge.require("nn")
    print(f"batch {BATCH}, float32, microseconds per step or call (a Markdown table)\n")
    print("| model | threads | LuaModule step | PyTorch step | Lua step | LuaModule / Lua | step overhead "
          "| call | Lua's own | call overhead | floor | glue |")
    print("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    for threads in (int(t) for t in args.threads.split(",")):
        limit_blas_threads(threads)
        torch.set_num_threads(threads)
        for name in ("small", "mlp", "lenet"):
            t = {k: v * 1e6 for k, v in measure(name, threads, args.quick).items()}
            call_overhead = t["call"] - t["own"]
            print(f"| {name} | {threads} | {t['luamodule']:.0f} | {t['torch']:.0f} | {t['lua']:.0f} "
                  f"| {t['luamodule'] / t['lua']:.2f} | {t['luamodule'] - t['lua']:.0f} | {t['call']:.0f} "
                  f"| {t['own']:.0f} | {call_overhead:.0f} | {t['floor']:.0f} | {call_overhead - t['floor']:.0f} |")
            sys.stdout.flush()

if __name__ == "__main__":
    main()
