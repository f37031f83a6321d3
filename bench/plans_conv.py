"""Whole-model conv plans (lua/nn/util/plan_conv.lua) A/B: bench/real_models.py's ResNet-18 rows
with nn.plans.enabled off (layer by layer) and on, and PyTorch's twin, interleaved in one
process (each round times all three; the best round of each counts; at 1 thread also the
calling thread's CPU time, which other processes on a shared machine disturb less), plus, with --profile, the
planned run's per-step times (oneDNN's implementation names).

    python bench/plans_conv.py [--rows resnet18-eval-1,resnet18-eval-8,resnet18-train-8]
                               [--threads 1,2] [--rounds 5] [--profile]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import real_models as rm
from machine import cpu_name

PROFILE = r"""
local model, x = ...
local be = require('torch.backend').cpu
local last, run = nil, be.plan_conv_run
be.plan_conv_run = function(exe, ...) last = exe; return run(exe, ...) end
model:evaluate(); model:forward(x); model:forward(x)
be.plan_conv_run = run
local by, order, total = {}, {}, 0
for _, t in ipairs(require('torch.backend.cpu.nn_plan').profile(last, 3)) do
  if not by[t.name] then order[#order + 1] = t.name; by[t.name] = 0 end
  by[t.name] = by[t.name] + t.ms; total = total + t.ms
end
for _, k in ipairs(order) do print(('  %-32s %8.2f ms'):format(k, by[k])) end
print(('  %-32s %8.2f ms'):format('all steps', total))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", default="resnet18-eval-1,resnet18-eval-8,resnet18-train-8")
    parser.add_argument("--threads", default="1")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    import luabridge

    rm.lua().watchLoad(False)
    switch = luabridge.eval("function(on) require('nn').plans.enabled = on end")
    rng = np.random.default_rng(0)
    print(f"{cpu_name()}; best ms per step of {args.rounds} interleaved rounds")
    print("| row | threads | plans off ms | plans on ms | PyTorch ms | on/off | on/PyTorch | CPU ms off / on / PyTorch |")
    print("|---|---|---|---|---|---|---|---|")
    for key in args.rows.split(","):
        row = next(r for r in rm.ROWS if r.key == key)
        x, y = rm.row_data(row, rng)
        ours, theirs = rm.steps_pair(row, x, y)
        for n in (int(t) for t in args.threads.split(",")):
            rm.set_threads(n)
            best = {"off": float("inf"), "on": float("inf"), "torch": float("inf")}
            cpu = dict(best)
            for _ in range(args.rounds):
                for name, step in (("off", ours), ("on", ours), ("torch", theirs)):
                    if name != "torch":
                        switch(name == "on")
                    step(1)
                    t0, c0 = time.perf_counter(), time.thread_time()
                    step(2)
                    best[name] = min(best[name], (time.perf_counter() - t0) / 2)
                    cpu[name] = min(cpu[name], (time.thread_time() - c0) / 2)
            switch(True)
            print(f"| {key} | {n} | {best['off'] * 1e3:.2f} | {best['on'] * 1e3:.2f} | {best['torch'] * 1e3:.2f} "
                  f"| {best['on'] / best['off']:.2f} | {best['on'] / best['torch']:.2f} "
                  f"| {cpu['off'] * 1e3:.1f} / {cpu['on'] * 1e3:.1f} / {cpu['torch'] * 1e3:.1f} |", flush=True)
        if args.profile and row.mode == "eval":
            model = rm.lua_model(row.model)
            luabridge.runtime().execute(PROFILE, model, luabridge.from_numpy(x))


if __name__ == "__main__":
    main()
