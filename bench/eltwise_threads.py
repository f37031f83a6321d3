"""Where oneDNN's eltwise, softmax and binary passes pay for nn's activation, softmax and table
modules: each module pass (Float, contiguous) on its old path (dnnl.enabled false: numpy's SIMD
loops, LuaJIT loops or tensor ops), on oneDNN at 1 thread and at 2 threads, and as the rule
(dnnl_eltwise.limits) picks, at 1e3 .. 1e7 elements.

    python bench/eltwise_threads.py [--sizes 1e3,1e4,...] [--repeats R] [--seconds S] [--only Tanh,...]
    python bench/eltwise_threads.py --models [--rounds R] [--only lenet,vgg,resnet18]

Each cell is the best of R runs of about S seconds of calls, the paths alternating within a
round (the machine may be shared); `cpu` is the process CPU time per call (both threads' work),
so cpu/wall near 2 says the second thread ran. The last lines give, per pass, the size from
which oneDNN on one thread beats the old path at every larger size measured (`one`) and the
elements per thread from which 2 threads beat the faster one-thread path (`least`): the values
of dnnl_eltwise.limits.

--models: the issue's rows that use these modules (bench/real_models.lua's ResNet-18 training
step at batch 8, vgg_bn_drop's at 64, LeNet's at 256), these passes on and off
(dnnl_eltwise.enabled) alternating in one process, at 1 and 2 threads: the best step's wall
time, and per step the wall and process CPU time spent in the activation, softmax and table
modules (their updateOutput / updateGradInput, timed around each call).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

# (label, constructor, input range (lo, hi), limits group/name of forward, of backward)
MODULES = [
    ("ReLU", "nn.ReLU()", (-1, 1), "ef Threshold", "eb Threshold"),
    ("ReLU inplace", "nn.ReLU(true)", (-1, 1), "ef Threshold", "eb Threshold"),
    ("LeakyReLU", "nn.LeakyReLU(0.1)", (-1, 1), "ef LeakyReLU", "eb LeakyReLU"),
    ("ELU", "nn.ELU()", (-2, 2), "ef ELU", "eb ELU"),
    ("Tanh", "nn.Tanh()", (-2, 2), "ef Tanh", "eb Tanh"),
    ("Sigmoid", "nn.Sigmoid()", (-2, 2), "ef Sigmoid", "eb Sigmoid"),
    ("SoftPlus", "nn.SoftPlus()", (-2, 2), "ef SoftPlus", "eb SoftPlus"),
    ("Abs", "nn.Abs()", (-1, 1), "ef Abs", "eb Abs"),
    ("Square", "nn.Square()", (-1, 1), "ef Square", "eb Square"),
    ("Sqrt", "nn.Sqrt()", (0.1, 2), "ef Sqrt", None),
    ("Exp", "nn.Exp()", (-2, 2), "ef Exp", "eb Exp"),
    ("Log", "nn.Log()", (0.1, 2), "ef Log", "eb Log"),
    ("HardTanh", "nn.HardTanh()", (-2, 2), "ef HardTanh", "eb HardTanh"),
    ("SoftMax 2D x100", "nn.SoftMax()", (-2, 2), "sf soft", "sb soft"),
    ("LogSoftMax 2D x100", "nn.LogSoftMax()", (-2, 2), "sf log", "sb log"),
    ("SpatialSoftMax 4D x16", "nn.SpatialSoftMax()", (-2, 2), "sf soft", "sb soft"),
    ("CAddTable x2", "nn.CAddTable()", (-1, 1), "bin add", "bin copy"),
    ("CMulTable x2", "nn.CMulTable()", (-1, 1), "bin mul", "bin mul"),
]

TIMING = r"""
require 'nn'
local dnnl = require 'torch.backend.cpu.dnnl'
local eltwise = require 'torch.backend.cpu.dnnl_eltwise'
local blas = require 'torch.backend.cpu.blas'

-- The input of n elements for label (softmax: rows of 100 classes, or B x 16 x 16 x W)
local function inputFor(label, n, lo, hi)
  local x
  if label:find('2D') then x = torch.FloatTensor(math.max(1, math.floor(n / 100)), 100)
  elseif label:find('4D') then x = torch.FloatTensor(math.max(1, math.floor(n / 4096)), 16, 16, 16)
  else x = torch.FloatTensor(n) end
  x:uniform(lo, hi)
  if label:find('Table') then return { x, x:clone():uniform(lo, hi) } end
  return x
end

-- Seconds (wall, process CPU) per call of the module's pass ('f' or 'b') on path: 'old', 1, 2
-- or 'rule'; calls go on for at least `seconds`.
return function(label, ctor, lo, hi, n, pass, path, seconds)
  local m = loadstring('return ' .. ctor)():float()
  local x = inputFor(label, n, lo, hi)
  local watch = blas.watchLoad
  blas.watchLoad = false
  torch.setnumthreads(2)
  dnnl.enabled = path ~= 'old'
  eltwise.forceThreads = type(path) == 'number' and path or nil
  local out = m:forward(x)
  local go = (torch.isTensor(out) and out or out[1]):clone():uniform(-1, 1)
  local call
  if pass == 'f' then call = function() m:updateOutput(x) end
  else call = function() m:updateGradInput(x, go) end end
  call()
  local calls, timer, c0 = 0, torch.Timer(), os.clock()
  repeat
    call(); call()
    calls = calls + 2
  until timer:time().real >= seconds
  local wall, cpu = timer:time().real / calls, (os.clock() - c0) / calls
  dnnl.enabled, eltwise.forceThreads, blas.watchLoad = true, nil, watch
  return wall, cpu
end
"""

PATHS = ["old", 1, 2, "rule"]

MODEL_ROWS = [("lenet", 256, "ClassNLLCriterion", (1, 28, 28), 10), ("vgg", 64, "CrossEntropyCriterion", (3, 32, 32), 10),
              ("resnet18", 8, "CrossEntropyCriterion", (3, 224, 224), 1000)]

MODEL_TIMING = r"""
local path = ...
local models = dofile(path)
local eltwise = require 'torch.backend.cpu.dnnl_eltwise'
local blas = require 'torch.backend.cpu.blas'
local timed = { ['nn.ReLU'] = true, ['nn.Threshold'] = true, ['nn.Tanh'] = true, ['nn.Sigmoid'] = true,
  ['nn.ELU'] = true, ['nn.LeakyReLU'] = true, ['nn.HardTanh'] = true, ['nn.SoftMax'] = true,
  ['nn.LogSoftMax'] = true, ['nn.CAddTable'] = true, ['nn.CMulTable'] = true }

-- A training step of model `name` (batch, criterion, sample size, classes) and the time its
-- timed modules took: returns step(), spent() -> wall, cpu since the last call.
local function build(name, batch, criterion, c, h, w, classes)
  local model = models[name](name ~= 'lenet' and classes or nil):float()
  local x = torch.FloatTensor(batch, c, h, w):uniform()
  local y = torch.LongTensor(batch):random(1, classes)
  local wall, cpu = 0, 0
  for _, m in ipairs(model:listModules()) do
    if timed[torch.type(m)] then
      for _, method in ipairs { 'updateOutput', 'updateGradInput' } do
        local f = m[method]
        m[method] = function(self, ...)
          local timer, c0 = torch.Timer(), os.clock()
          local r = f(self, ...)
          wall, cpu = wall + timer:time().real, cpu + os.clock() - c0
          return r
        end
      end
    end
  end
  local step = models.trainer(model, nn[criterion]():float(), x, y, 0.01)
  return step, function()
    local a, b = wall, cpu
    wall, cpu = 0, 0
    return a, b
  end
end

-- best over `rounds` of each (threads, on/off) of: the step's wall time, the modules' wall and
-- CPU time in that step, alternating
return function(name, batch, criterion, c, h, w, classes, rounds)
  local step, spent = build(name, batch, criterion, c, h, w, classes)
  local watch, threads, was = blas.watchLoad, torch.getnumthreads(), eltwise.enabled
  blas.watchLoad = false
  local best = {}
  for _ = 1, rounds do
    for _, t in ipairs { 1, 2 } do
      torch.setnumthreads(t)
      for _, on in ipairs { false, true } do
        eltwise.enabled = on
        step(1); spent()
        local timer = torch.Timer()
        step(1)
        local s = timer:time().real
        local mw, mc = spent()
        local key = t .. (on and ' on' or ' off')
        local b = best[key]
        if not b then b = { math.huge, math.huge, math.huge }; best[key] = b end
        b[1], b[2], b[3] = math.min(b[1], s), math.min(b[2], mw), math.min(b[3], mc)
      end
    end
  end
  blas.watchLoad, eltwise.enabled = watch, was
  torch.setnumthreads(threads)
  return best
end
"""


def models_table(args) -> None:
    import luabridge
    from machine import cores, cpu_name

    luabridge.require("nn")
    timing = luabridge.runtime().execute(MODEL_TIMING, str(Path(__file__).resolve().parent / "real_models.lua"))
    only = [o for o in args.only.split(",") if o]
    print(f"CPU: {cpu_name()}, {cores()} cores; ms per training step, best of {args.rounds} alternating rounds;"
          " the activation / softmax / table modules' share of it (wall, process CPU)")
    print("| model | batch | threads | step, off | step, on | modules wall, off | on | modules CPU, off | on |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, batch, criterion, (c, h, w), classes in MODEL_ROWS:
        if only and name not in only:
            continue
        best = timing(name, batch, criterion, c, h, w, classes, args.rounds)
        for t in (1, 2):
            off, on = best[f"{t} off"], best[f"{t} on"]
            print(f"| {name} | {batch} | {t} | {off[1] * 1e3:.1f} | {on[1] * 1e3:.1f} | {off[2] * 1e3:.2f} | "
                  f"{on[2] * 1e3:.2f} | {off[3] * 1e3:.2f} | {on[3] * 1e3:.2f} |", flush=True)


def fmt(t: float) -> str:
    return f"{t * 1e6:8.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1e3,1e4,1e5,1e6,1e7")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=0.05)
    ap.add_argument("--only", default="", help="labels (comma-separated prefixes), or with --models model names")
    ap.add_argument("--models", action="store_true", help="the real models' steps, these passes on and off")
    ap.add_argument("--rounds", type=int, default=5, help="with --models: alternating rounds")
    args = ap.parse_args()
    if args.models:
        models_table(args)
        return
    import luabridge
    from machine import cores, cpu_name

    luabridge.require("torch")
    if not luabridge.eval("require('torch.backend.cpu.dnnl').available"):
        sys.exit("oneDNN is not installed (pip install 'luabridge[onednn]')")
    timing = luabridge.execute(TIMING)
    sizes = [int(float(s)) for s in args.sizes.split(",")]
    only = [o for o in args.only.split(",") if o]
    print(f"CPU: {cpu_name()}, {cores()} cores; µs per call, best of {args.repeats} "
          f"(wall / process CPU), paths: old, oneDNN 1 thread, oneDNN 2 threads, the rule")
    summary = []
    for label, ctor, (lo, hi), fkey, bkey in MODULES:
        if only and not any(label.startswith(o) for o in only):
            continue
        for pass_, key in (("f", fkey), ("b", bkey)):
            if key is None:
                continue
            rows = {}
            for n in sizes:
                best = {p: (float("inf"), 0.0) for p in PATHS}
                for _ in range(args.repeats):
                    for p in PATHS:
                        wall, cpu = timing(label, ctor, lo, hi, n, pass_, p, args.seconds)
                        if wall < best[p][0]:
                            best[p] = (wall, cpu)
                rows[n] = best
                cells = "  ".join(f"{p!s:>4} {fmt(best[p][0])} /{fmt(best[p][1])}" for p in PATHS)
                print(f"{label:22s} {'forward ' if pass_ == 'f' else 'backward'} {n:>9d}  {cells}", flush=True)
            summary.append((label, pass_, key, rows))
    print("\nlimits (dnnl_eltwise.limits): one = the size from which oneDNN's 1 thread beats the old path at"
          " every larger size; least = elements per thread from which 2 threads beat the best 1-thread path")
    for label, pass_, key, rows in summary:
        ns = sorted(rows)
        one = next((n for i, n in enumerate(ns)
                    if all(rows[m][1][0] <= rows[m]["old"][0] for m in ns[i:])), None)
        two = next((n for i, n in enumerate(ns)
                    if all(rows[m][2][0] < min(rows[m]["old"][0], rows[m][1][0]) for m in ns[i:])), None)
        print(f"{label:22s} {pass_} [{key}]  one = {one if one is not None else 'never'}"
              f"  least = {two // 2 if two is not None else 'never'}")


if __name__ == "__main__":
    main()
