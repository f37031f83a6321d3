"""luabridge.torch.LuaModule inside a PyTorch training loop: a Lua MLP 784-256-10 and a LeNet-5
(examples/models/lenet.lua, 28x28) at batch 64, float32, against the same model in pure PyTorch
and in pure Lua nn (driven through luabridge), at the default thread count and at 1 thread; a
small model (Linear 32-10, LogSoftMax) shows the fixed cost of a call.

    python bench/torch_bridge.py [--quick] [--threads 1,2]

Rows per model and thread count. Each figure is the 10th percentile of single steps: the
variants of a model run in turn, in blocks of 20 steps (caches warm within a block), each step
timed alone, which sheds the preemptions of a loaded machine (a best mean over runs of many
steps does not: on a shared machine some step of every run is preempted).
- step: one training step. LuaModule: opt.zero_grad(), the LuaModule forward, F.nll_loss,
  backward, torch.optim.SGD's step. PyTorch: the same with the twin (our weights copied). Lua: one
  Lua function called per step (zeroGradParameters, forward, ClassNLLCriterion, backward,
  updateParameters). step overhead = LuaModule - Lua (this also counts PyTorch's loss and
  optimizer against Lua's).
- call: the module alone, forward and backward given a fixed output gradient. LuaModule:
  m.zero_grad(); m(x).backward(g). Lua's own work: forward and backward in one Lua function
  called from Python. call overhead = LuaModule - Lua's own work; floor: an autograd.Function
  that does nothing but copy its output and gradients (PyTorch's own cost of a custom Function,
  with the same Parameters), zero_grad included; glue = call overhead - floor.
Like the other benches, it says most on an idle machine.

A second table breaks the small model's call down, timed the same way. Lua, Function (the
floor) and LuaModule: the call rows of the first table; Function then Lua: both in one step,
not linked, the least that any autograd.Function calling Lua costs (alternation = what running
them in one step adds to their sum); no-grad forward: LuaModule's forward under
torch.no_grad() (no Function), against a Lua forward alone.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np

import luabridge
from nn_models import limit_blas_threads, torch_train_steps

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


def percentile_times(variants: dict[str, Callable[[], Any]], rounds: int, block: int = 20,
                     q: float = 10) -> dict[str, float]:
    """The q-th percentile of each variant's seconds per step: blocks of `block` steps of each
    variant in turn, every step timed alone."""
    import time

    samples: dict[str, list[float]] = {k: [] for k in variants}
    for f in variants.values():
        for _ in range(block):
            f()
    for _ in range(rounds):
        for k, f in variants.items():
            out = samples[k]
            for _ in range(block):
                t0 = time.perf_counter()
                f()
                out.append(time.perf_counter() - t0)
    return {k: float(np.percentile(v, q)) for k, v in samples.items()}


def breakdown(quick: bool) -> dict[str, float]:
    """The small model's call, piece by piece (see the docstring), microseconds."""
    import torch

    from luabridge.torch import LuaModule

    helpers = luabridge.runtime().execute(LUA, str(LENET))
    lua_model = luabridge.wrap(helpers.build("small"))
    module = LuaModule(lua_model)
    x = torch.from_numpy(np.random.default_rng(0).standard_normal((BATCH, 32)).astype(np.float32))
    g = torch.full((BATCH, 10), 1.0 / BATCH)
    lua_x, lua_g = luabridge.from_numpy(x.numpy()), luabridge.from_numpy(g.numpy())
    lua_call = helpers.calls(lua_model._lua, lua_x, lua_g)
    lua_forward = luabridge.eval("function(m, x) m:forward(x) end")
    function = autograd_floor(module, x, module(x).detach())

    def call() -> None:
        module.zero_grad()
        module(x).backward(g)

    def no_grad_forward() -> None:
        with torch.no_grad():
            module(x)

    variants = {"lua": lambda: lua_call(1), "function": function,
                "function+lua": lambda: (function(), lua_call(1)), "luamodule": call,
                "no-grad forward": no_grad_forward, "lua forward": lambda: lua_forward(lua_model._lua, lua_x)}
    return {k: v * 1e6 for k, v in percentile_times(variants, 40 if quick else 150).items()}


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
    rounds = {"small": 100, "mlp": 12, "lenet": 6}[name] // (3 if quick else 1)
    sgd = torch.optim.SGD(module.parameters(), lr=LR)

    def lua_module_step() -> None:
        sgd.zero_grad()
        F.nll_loss(module(x), y).backward()
        sgd.step()

    lua_x, lua_y = luabridge.from_numpy(x_np), luabridge.from_numpy(y_np.astype(np.float32))
    torch_steps = torch_train_steps(native, torch.nn.NLLLoss(), x, y, LR)
    g = torch.full((BATCH, 10), 1.0 / BATCH)
    own_calls = helpers.calls(lua_model._lua, lua_x, luabridge.from_numpy(g.numpy()))

    def call() -> None:
        module.zero_grad()
        module(x).backward(g)

    variants = {"luamodule": lua_module_step, "torch": lambda: torch_steps(1),
                "lua": helpers.stepper(lua_model._lua, lua_x, lua_y, LR), "call": call,
                "own": lambda: own_calls(1), "floor": autograd_floor(module, x, module(x).detach())}
    return percentile_times(variants, rounds)


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
    print("\nThe small model's call piece by piece (10th percentile of single steps; see the docstring)\n")
    print("| threads | Lua | Function | Function then Lua | LuaModule | overhead | glue | alternation "
          "| glue beyond alternation | no-grad forward | Lua forward |")
    print("|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    for threads in (int(t) for t in args.threads.split(",")):
        limit_blas_threads(threads)
        torch.set_num_threads(threads)
        t = breakdown(args.quick)
        overhead = t["luamodule"] - t["lua"]
        print(f"| {threads} | {t['lua']:.0f} | {t['function']:.0f} | {t['function+lua']:.0f} | {t['luamodule']:.0f} "
              f"| {overhead:.0f} | {overhead - t['function']:.0f} "
              f"| {t['function+lua'] - t['function'] - t['lua']:.0f} | {t['luamodule'] - t['function+lua']:.0f} "
              f"| {t['no-grad forward']:.0f} | {t['lua forward']:.0f} |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
