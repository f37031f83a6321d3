"""Denormal floats in ResNet-18's training step (bench/real_models.py's row resnet18-train-8):
how many activations, gradients and weights are denormal after some SGD steps, and the step's
time with the x86 MXCSR's flush-to-zero and denormals-are-zero bits set or not.

    python bench/denormals.py [--steps 0,1,5,20] [--reps 6] [--batch 8] [--threads 1] [--priority]

Two models, same data: ResNet-18 as bench/real_models.lua builds it (torch7's initialisation:
batch norm scales uniform(0, 1)) and the same with PyTorch's (batch norm scales 1, as the
bench's PyTorch twin would start). Counts: each leaf module's output, gradInput, weight,
gradWeight, bias and gradBias, float32 values with 0 < |x| < 2^-126 (what the plans keep in
oneDNN's buffers is not visible; the module fields are read after each counted step). Timing:
steps of the four (model, FTZ/DAZ) pairs alternating in this process, at --threads 1 so that
every pass runs on this thread, whose MXCSR torch.set_flush_denormal sets (PyTorch's call: FTZ
and DAZ together). FTZ is put back off at the end.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import luabridge

SETUP = r"""
local path, batch, threads = ...
require 'nn'
local blas = require 'torch.backend.cpu.blas'
blas.watchLoad = false
torch.setnumthreads(threads)
local build = dofile(path)
local t7 = build('resnet18', batch)
local pt = build('resnet18', batch)
pt.model:float()
-- the same weights as t7, then PyTorch's batch norm start (scale 1, shift 0)
pt.params:copy(t7.params)
for _, bn in ipairs(pt.model:findModules('nn.SpatialBatchNormalization')) do bn.weight:fill(1); bn.bias:zero() end
pt.x, pt.y = t7.x, t7.y
local models = { t7 = t7, pytorch = pt }
local TINY = 1.1754943508222875e-38   -- 2^-126, the least normal float32
local function denormals(t)
  if not t or torch.type(t) ~= 'torch.FloatTensor' or t:nElement() == 0 then return 0, 0 end
  local a = t:clone():abs()
  return a:lt(TINY):sum() - a:eq(0):sum(), t:nElement()
end
local fields = { 'output', 'gradInput', 'weight', 'gradWeight', 'bias', 'gradBias' }
local function count(which)
  local m = models[which]
  local byField, byModule = {}, {}
  for _, f in ipairs(fields) do byField[f] = { 0, 0 } end
  for i, mod in ipairs(m.model:listModules()) do
    if not mod.modules then
      local here = 0
      for _, f in ipairs(fields) do
        local d, n = denormals(mod[f])
        byField[f][1], byField[f][2] = byField[f][1] + d, byField[f][2] + n
        here = here + d
      end
      if here > 0 then byModule[#byModule + 1] = ('%d %s: %d'):format(i, torch.type(mod), here) end
    end
  end
  return byField, table.concat(byModule, '; ')
end
local function step(which) models[which].step() end
return step, count
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", default="0,1,5,20", help="counts after these many SGD steps")
    parser.add_argument("--reps", type=int, default=6, help="timed steps per (model, FTZ) pair")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--priority", action="store_true", help="an autogroup of its own at nice -20 (root)")
    args = parser.parse_args()
    if args.priority:
        if os.getsid(0) != os.getpid():
            os.setsid()
        with open("/proc/self/autogroup", "w") as f:
            f.write("-20")
    import torch

    luabridge.require("nn")
    here = os.path.dirname(os.path.abspath(__file__))
    step, count = luabridge.runtime().execute(SETUP, os.path.join(here, "step_models.lua"), args.batch,
                                              args.threads)
    marks = sorted({int(s) for s in args.steps.split(",")})
    done = 0
    print(f"ResNet-18 batch {args.batch}, {args.threads} thread(s): denormal float32 values (0 < |x| < 2^-126)")
    for mark in marks:
        for which in ("t7", "pytorch"):
            for _ in range(mark - done):
                step(which)
            by_field, by_module = count(which)
            cells = ", ".join(f"{k} {int(by_field[k][1])}/{int(by_field[k][2])}"
                              for k in ("output", "gradInput", "weight", "gradWeight", "bias", "gradBias"))
            print(f"after {mark:3d} steps, {which:8s} init: {cells}")
            if by_module:
                print(f"    by module: {by_module[:600]}")
        done = mark
    times: dict[tuple[str, bool], list[float]] = {(w, f): [] for w in ("t7", "pytorch") for f in (False, True)}
    for _ in range(args.reps):
        for key in times:
            torch.set_flush_denormal(key[1])
            t0 = time.perf_counter()
            step(key[0])
            times[key].append(time.perf_counter() - t0)
    torch.set_flush_denormal(False)
    print("step times, ms (best / median), alternating step by step:")
    for (which, ftz), ts in times.items():
        print(f"  {which:8s} init, FTZ/DAZ {'on ' if ftz else 'off'}: {1e3 * min(ts):8.1f} / "
              f"{1e3 * statistics.median(ts):8.1f}")


if __name__ == "__main__":
    main()
