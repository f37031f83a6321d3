"""Where ResNet-18's 1-thread time goes, ours (the whole-model plan's oneDNN steps, each run alone)
against PyTorch eager (torch.profiler, grouped by op and input shape), for bench/real_models.py's
rows resnet18-eval-1 and resnet18-train-8 (same models, same weights, same data).

    python bench/resnet_passes.py [--rows resnet18-eval-1,resnet18-train-8] [--threads 1] [--reps 5]

Ours: every step of the plan's executable (forward; and backward for training) run alone `reps`
times after a whole step (lua/torch/backend/cpu/nn_plan.lua's profile), best of `reps` such
profiles; the time inside the plan's calls in place (a whole step); the rest of the step
(criterion, the modules after the plan, gradient zeroing, the SGD update) is whole - in place.
For an evaluation row also the forward without the plan's weight reorders (the reorder steps
whose removal leaves the output bit-identical while the weights do not change): what caching
the blocked weights between forwards would save. GFLOP/s per convolution from ResNet-18's
shapes (CONVS below). PyTorch: torch.profiler over single steps, each op's best of `reps`.
"""
from __future__ import annotations

import argparse
import time
from collections import OrderedDict

import numpy as np

import real_models as rm
from machine import cpu_name

CAPTURE = r"""
local model, x, mode = ...
local be = require('torch.backend').cpu
local names = { eval = 'plan_conv_run', train = 'plan_train_forward' }
local key = names[mode]
local sys = require 'sys'
local wrapped, saved, spent = { key, mode == 'train' and 'plan_train_backward' or nil }, {}, {}
local last
for _, k in ipairs(wrapped) do
  local run = be[k]
  saved[k], spent[k] = run, 0
  be[k] = function(exe, ...)
    if k == key then last = exe end
    local t0 = sys.clock()
    local r = run(exe, ...)
    spent[k] = spent[k] + sys.clock() - t0
    return r
  end
end
-- restore: put the backend back; else (reset): zero the plan-call times; returns the exe and
-- the milliseconds spent in the plan calls since the last reset
return function(restore)
  local ms = 0
  for _, k in ipairs(wrapped) do ms = ms + spent[k] * 1000; spent[k] = 0 end
  if restore then for _, k in ipairs(wrapped) do be[k] = saved[k] end end
  return last, ms
end
"""

# the eval forward with and without the weight reorders (A/B alternating, best of reps)
NO_WEIGHT_REORDERS = r"""
local model, x, reps = ...
local sys = require 'sys'
local be = require('torch.backend').cpu
local run, use, full = be.plan_conv_run, nil, nil
be.plan_conv_run = function(exe, ...)
  full = full or exe.before
  exe.before = use or full
  local ok, r = pcall(run, exe, ...)
  exe.before = full
  if not ok then error(r) end
  return r
end
model:evaluate()
local ref = model:forward(x):clone()
local drop = {}
for i, st in ipairs(full) do
  if i > 1 and (st.name or ''):match('^reorder') then
    use = {}
    for j, s2 in ipairs(full) do if j ~= i then use[#use + 1] = s2 end end
    local same = model:forward(x):clone():add(-1, ref):abs():max() == 0
    use = nil
    model:forward(x)
    if same then drop[i] = true end
  end
end
local cut = {}
for i, st in ipairs(full) do if not drop[i] then cut[#cut + 1] = st end end
use = cut
local same = model:forward(x):clone():add(-1, ref):abs():max() == 0
local best = { full = math.huge, cut = math.huge }
for _ = 1, reps do
  for _, k in ipairs { 'full', 'cut' } do
    use = k == 'cut' and cut or nil
    local t0 = sys.clock(); model:forward(x); best[k] = math.min(best[k], sys.clock() - t0)
  end
end
use = nil
be.plan_conv_run = run
return ('  ours: forward %.2f ms; without its %d weight reorders %.2f ms (output identical: %s)'):format(
  best.full * 1e3, #full - #cut, best.cut * 1e3, tostring(same))
"""

PROFILE = r"""
local exe, mode, reps = ...
local prof = require('torch.backend.cpu.nn_plan').profile
local out = {}
local parts = mode == 'eval' and { { 'fwd', exe } } or { { 'fwd', exe.fwd }, { 'bwd', exe.bwd } }
for _, p in ipairs(parts) do
  if mode ~= 'eval' then p[2].threads = exe.threads end
  for _, t in ipairs(prof(p[2], reps)) do out[#out + 1] = p[1] .. '\t' .. t.name .. '\t' .. t.ms end
end
return table.concat(out, '\n')
"""


def kind(name: str) -> str:
    """a step's name without oneDNN's implementation name"""
    return name.rsplit(" ", 1)[0]


# ResNet-18's convolutions in the plan's order (a down-sampling block's 1x1 shortcut first):
# (out, in, k, output side) at batch 1; multiply-adds = out * in * k * k * side * side
CONVS = [(64, 3, 7, 112)] + [(64, 64, 3, 56)] * 4
for w, side in ((128, 28), (256, 14), (512, 7)):
    CONVS += [(w, w // 2, 1, side), (w, w // 2, 3, side)] + [(w, w, 3, side)] * 3


def conv_gflop(i: int, batch: int) -> float:
    o, c, k, side = CONVS[i]
    return 2 * o * c * k * k * side * side * batch / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", default="resnet18-eval-1,resnet18-train-8")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--steps", action="store_true", help="print every plan step")
    args = parser.parse_args()
    import luabridge
    from torch.profiler import ProfilerActivity, profile

    rm.lua().watchLoad(False)
    rm.set_threads(args.threads)
    rng = np.random.default_rng(0)
    print(f"{cpu_name()}; {args.threads} thread(s)")
    rt = luabridge.runtime()
    for key in args.rows.split(","):
        row = next(r for r in rm.ROWS if r.key == key)
        x, y = rm.row_data(row, rng)
        ours, twin = rm.pair(row.model)
        cap = rt.execute(CAPTURE, ours, luabridge.from_numpy(x), row.mode)
        mine, theirs = rm.steps_pair(row, x, y, (ours, twin))
        best = {"ours": float("inf"), "torch": float("inf"), "plan": float("inf")}
        for _ in range(args.reps):
            for name, step in (("ours", mine), ("torch", theirs)):
                step(1)
                cap(False)
                t0 = time.perf_counter()
                step(1)
                best[name] = min(best[name], time.perf_counter() - t0)
                if name == "ours":
                    best["plan"] = min(best["plan"], cap(False)[1] / 1e3)
        exe = cap(True)[0]
        # each step's best of `reps` profiles (each the mean of `reps` runs alone)
        steps = None
        for _ in range(args.reps):
            text = rt.execute(PROFILE, exe, row.mode, args.reps)
            got = [ln.split("\t") for ln in str(text).split("\n") if ln]
            steps = got if steps is None else [a if float(a[2]) <= float(b[2]) else b for a, b in zip(steps, got)]
        print(f"\n## {key}: whole step ours {best['ours'] * 1e3:.2f} ms, PyTorch {best['torch'] * 1e3:.2f} ms "
              f"({best['ours'] / best['torch']:.2f}x)")
        print(f"  ours: in the plan's calls (in place) {best['plan'] * 1e3:.2f} ms")
        by: "OrderedDict[str, float]" = OrderedDict()
        total = 0.0
        convs: dict[str, int] = {}
        for part, name, ms in steps:
            k = f"{part} {kind(name)}"
            by[k] = by.get(k, 0.0) + float(ms)
            total += float(ms)
            rate = ""
            if name.startswith("conv"):
                i = convs.get(k, 0)
                convs[k] = i + 1
                if i < len(CONVS):
                    g = conv_gflop(i if part == "fwd" else len(CONVS) - 1 - i, row.batch)
                    rate = f" layer {i if part == 'fwd' else len(CONVS) - 1 - i:2d} {g / float(ms) * 1e3:6.1f} GFLOP/s"
            if args.steps:
                print(f"  {part} {name:50s} {float(ms):8.3f}{rate}")
        print("ours, plan steps by kind (each run alone):")
        for k, v in by.items():
            print(f"  {k:40s} {v:8.2f} ms")
        print(f"  {'all plan steps (alone)':40s} {total:8.2f} ms; in place {best['plan'] * 1e3:.2f} ms; "
              f"outside the plan's calls {(best['ours'] - best['plan']) * 1e3:.2f} ms")
        if row.mode == "eval":
            print(rt.execute(NO_WEIGHT_REORDERS, ours, luabridge.from_numpy(x), 4 * args.reps))
        # PyTorch: the profiler over one step, `reps` times; each op's (and op and shape's) best
        theirs(1)
        ops: dict = {}
        shapes: dict = {}
        for _ in range(args.reps):
            with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
                theirs(1)
            for e in prof.key_averages():
                ops[e.key] = min(ops.get(e.key, (float("inf"), 0)), (e.self_cpu_time_total / 1e3, e.count))
            for e in prof.key_averages(group_by_input_shape=True):
                k = (e.key, str(e.input_shapes[:2])[:70])
                shapes[k] = min(shapes.get(k, float("inf")), e.cpu_time_total / 1e3)
        print("PyTorch, self CPU ms per step by op (best of the profiled steps; top 25):")
        for k, (v, n) in sorted(ops.items(), key=lambda kv: -kv[1][0])[:25]:
            print(f"  {k:40s} {v:8.2f} ms  x{n}")
        print(f"  {'all ops':40s} {sum(v for v, _ in ops.values()):8.2f} ms")
        print("PyTorch, conv, batch norm, pooling and linear ops by input shape (CPU total ms per step):")
        keep = ("aten::mkldnn_convolution", "aten::convolution_backward", "aten::native_batch_norm",
                "aten::native_batch_norm_backward", "aten::max_pool2d_with_indices",
                "aten::max_pool2d_with_indices_backward", "aten::addmm", "aten::mm")
        for (k, shp), v in sorted(shapes.items(), key=lambda kv: -kv[1]):
            if k in keep:
                print(f"  {k:36s} {shp:70s} {v:8.3f}")

if __name__ == "__main__":
    main()
