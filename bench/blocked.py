"""The threaded, blocked elementwise path (luabridge/providers/torch_cpu/blocked.py) against the
passes it replaces, in one process, alternating A/B, best of --reps: single ops by size (where
blocked.from / least sit), optim's updates on flat parameters (ResNet-18's 11.7M, an MLP's
0.6M) and Dropout's forward at VGG's sizes, on 1 and 2 threads, with the thread CPU time
(bench/machine.py). python bench/blocked.py [--reps 5] [--only ops,optim,dropout] [--priority]
(--priority, root: a session of its own at autogroup nice -20, ahead of the machine's other work,
as bench/fusion.py and bench/real_models.py take it)."""
from __future__ import annotations

import argparse
import os
import time

import luabridge

SETUP = """(function()
  require 'nn'; require 'optim'
  local blas = require 'torch.backend.cpu.blas'
  blas.watchLoad = false
  local pw = require('torch.backend.cpu.pointwise').blocked
  local masks = require('torch.backend.cpu.random').masks
  return function(enabled, threads, fn)
    pw.enabled, masks.enabled = enabled, enabled
    torch.setnumthreads(threads)
    fn()
  end
end)()"""

CASES = {
    "ops": [
        (f"{op} {n}", f"""(function() local a, b = torch.FloatTensor({n}):uniform(1, 2), torch.FloatTensor({n}):uniform(1, 2)
            local r = a.new():resizeAs(a)
            return function() {body} end end)()""")
        for n in (65536, 262144, 1048576, 4194304, 11689512)
        for op, body in (("cmul", "r:cmul(a, b)"), ("axpy", "r:add(a, 0.5, b)"), ("axpy in place", "a:add(0.5, b)"),
                         ("addcdiv", "r:addcdiv(a, 0.5, a, b)"))
    ],
    "optim": [
        (f"{name} {label}", f"""(function() local x = torch.FloatTensor({n}):normal()
            local g = torch.FloatTensor({n}):normal():mul(1e-2)
            local cfg = {cfg}
            local function f() return 0, g end
            optim.{name}(f, x, cfg)
            return function() optim.{name}(f, x, cfg) end end)()""")
        for label, n in (("resnet18 11.7M", 11_689_512), ("mlp 0.6M", 669_706))
        for name, cfg in (("sgd", "{learningRate = 0.1, momentum = 0.9, weightDecay = 1e-4}"),
                          ("adam", "{learningRate = 1e-3}"))
    ],
    "dropout": [
        ("Dropout fwd+bwd 64x4096", """(function() local m = nn.Dropout(0.5):float()
            local x = torch.FloatTensor(64, 4096):uniform()
            m:forward(x); m:backward(x, x)
            return function() m:forward(x); m:backward(x, x) end end)()"""),
        # bench/real_models.lua's cifar VGG at batch 64: its Dropouts' input sizes
        ("VGG cifar Dropouts fwd+bwd", """(function()
            local ms, xs = {}, {}
            for i, s in ipairs { {64, 32, 32, .3}, {128, 16, 16, .4}, {256, 8, 8, .4}, {256, 8, 8, .4},
                                 {512, 4, 4, .4}, {512, 4, 4, .4}, {512, 2, 2, .4}, {512, 2, 2, .4},
                                 {512, 1, 1, .5}, {512, 1, 1, .5} } do
              ms[i], xs[i] = nn.Dropout(s[4]):float(), torch.FloatTensor(64, s[1], s[2], s[3]):uniform()
            end
            local function run() for i = 1, #ms do ms[i]:forward(xs[i]); ms[i]:backward(xs[i], xs[i]) end end
            run()
            return run end)()"""),
    ],
}


def timed(run, fn, enabled, threads, reps):
    best, best_cpu = float("inf"), float("inf")   # process CPU time: every thread's
    for _ in range(reps):
        t0, c0 = time.perf_counter(), time.process_time()
        run(enabled, threads, fn)
        best = min(best, time.perf_counter() - t0)
        best_cpu = min(best_cpu, time.process_time() - c0)
    return best * 1e3, best_cpu * 1e3


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--only", default="ops,optim,dropout")
    ap.add_argument("--priority", action="store_true")
    args = ap.parse_args()
    if args.priority:
        if os.getsid(0) != os.getpid():
            os.setsid()
        with open("/proc/self/autogroup", "w") as f:
            f.write("-20")
    run = luabridge.eval(SETUP)
    print(f"{'case':28s} {'threads':>7s} {'old ms':>9s} {'new ms':>9s} {'speed-up':>8s} {'old cpu ms':>10s} "
          f"{'new cpu ms':>10s}")
    for group in args.only.split(","):
        for label, src in CASES[group]:
            fn = luabridge.eval(src)
            for threads in (1, 2):
                old = new = (float("inf"), 0.0)
                for _ in range(2):   # alternate A/B
                    o = timed(run, fn, False, threads, args.reps)
                    n = timed(run, fn, True, threads, args.reps)
                    old, new = min(old, o), min(new, n)
                print(f"{label:28s} {threads:7d} {old[0]:9.3f} {new[0]:9.3f} {old[0] / new[0]:8.2f} {old[1]:10.3f} "
                      f"{new[1]:10.3f}", flush=True)


if __name__ == "__main__":
    main()
