"""Where char-rnn's LSTM step (bench/real_models.lua: nngraph, 2 layers of 128, 50 clones,
batch 32, float32) spends its time at 1 and at 2 threads, and A/B timings of switches.

    python bench/lstm_threads.py [--priority] [--rounds N] [--batch B] [--eval]
                                 [--variant NAME=LUA ...] [--profile]

Each round runs every (variant, thread count) once, in alternation, after a warm-up; a figure is
the best round (ms per step), with the process CPU time of that round (all threads) beside it.
A variant is a Lua snippet run before its timing block (and `--reset` after it, to put the
defaults back): e.g. `--variant 'short1=require("torch.backend.cpu.blas").minWork.gemmShortK=1e9'`.
`--profile` adds, per thread count, the time inside the BLAS products by shape (blas.gemm, ger,
gemv, axpy wrapped with a monotonic clock) and the thread count each got.
Time it with nothing else running: --priority (root) runs at autogroup nice -20 as
bench/real_models.py does.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

import luabridge

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
import real_models  # noqa: E402

LUA = r"""
local profile = ...
local blas = require 'torch.backend.cpu.blas'
local ffi = require 'ffi'
local H = {}
local stats, order = {}, {}
local clock = os.clock
pcall(ffi.cdef, 'typedef struct { long s; long ns; } lstm2t_ts; int lstm2t_gettime(int, lstm2t_ts *) __asm__("clock_gettime");')
local ts = ffi.new('lstm2t_ts')
local function now() ffi.C.lstm2t_gettime(1, ts); return tonumber(ts.s) + tonumber(ts.ns) * 1e-9 end
H.now = now
local originals = {}
local function wrap(name, keyOf)
  local f = blas[name]
  originals[name] = f
  blas[name] = function(...)
    if not H.on then return f(...) end
    local key = keyOf(...)
    local t0 = now()
    local r = f(...)
    local s = stats[key]
    if not s then s = { n = 0, t = 0 }; stats[key] = s; order[#order + 1] = key end
    s.n, s.t = s.n + 1, s.t + now() - t0
    return r
  end
end
if profile then
  wrap('gemm', function(dt, ta, tb, m, n, k, alpha)
    local least = blas.gemmLeast(dt, ta, tb, k)
    return ('gemm %s%s %dx%dx%d a=%g thr=%d'):format(ta and 'T' or 'N', tb and 'T' or 'N', m, n, k, alpha,
      blas.threadsFor(m * n * k, least))
  end)
  wrap('ger', function(dt, m, n) return ('ger %dx%d'):format(m, n) end)
  wrap('gemv', function(dt, tr, m, n) return ('gemv %dx%d'):format(m, n) end)
  if blas.axpy then wrap('axpy', function(dt, n) return ('axpy %d'):format(n) end) end
end
if profile then   -- the plan's passes, as a whole
  local plan = require 'nngraph.plan'
  for _, name in ipairs { 'forward', 'backward', 'acc' } do
    local f = plan[name]
    plan[name] = function(...)
      if not H.on then return f(...) end
      local t0 = now()
      f(...)
      local key = 'plan.' .. name .. ' (products inside too)'
      local s = stats[key]
      if not s then s = { n = 0, t = 0 }; stats[key] = s; order[#order + 1] = key end
      s.n, s.t = s.n + 1, s.t + now() - t0
    end
  end
end
function H.reset()
  stats, order = {}, {}
  local q = require('torch.backend.cpu.gemm_async').queue()
  if q then H.posted0, H.busy0, H.late0, H.stolen0 = tonumber(q.posted), q.busyTime, q.lateTime, tonumber(q.stolen) end
end
function H.worker()
  local q = require('torch.backend.cpu.gemm_async').queue()
  if not q or not H.posted0 then return '' end
  local n = tonumber(q.posted) - H.posted0
  if n == 0 then return 'worker: no jobs' end
  local stolen = tonumber(q.stolen) - H.stolen0
  local ran = n - stolen
  return ('products posted: %d, %d run by the worker (%.1f us each, %.1f us from post to start), %d by the caller'):format(
    n, ran, (q.busyTime - H.busy0) / math.max(ran, 1) * 1e6, (q.lateTime - H.late0) / math.max(ran, 1) * 1e6, stolen)
end
function H.report()
  local out = {}
  for _, k in ipairs(order) do out[#out + 1] = ('%-40s %6d calls %9.3f ms'):format(k, stats[k].n, stats[k].t * 1e3) end
  return table.concat(out, '\n')
end
function H.total()
  local t = 0
  for k, s in pairs(stats) do if not k:find('^plan') then t = t + s.t end end
  return t
end
function H.run(code) return assert(loadstring(code))() end
return H
"""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--priority", action="store_true")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--eval", action="store_true", help="the forward in evaluation mode, not the training step")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--variant", action="append", default=[], help="NAME=LUA (run before the block)")
    p.add_argument("--reset", default="", help="LUA run after each variant's block")
    p.add_argument("--profile", action="store_true")
    p.add_argument("--reps", type=int, default=8)
    p.add_argument("--torch", action="store_true", help="import PyTorch first and run a 2-thread product (as bench/real_models.py's process)")
    args = p.parse_args()

    if args.torch:
        import torch
        torch.set_num_threads(2)
        a = torch.randn(512, 512)
        for _ in range(20):
            a @ a
    if args.priority:
        real_models.take_priority()
    h = real_models.lua()
    h.watchLoad(False)
    prof = luabridge.runtime().execute(LUA, args.profile)
    rng = np.random.default_rng(0)
    row = real_models.Row("lstm", "lstm", "lstm", args.batch, "eval" if args.eval else "train")
    x, y = real_models.row_data(row, rng)
    ours = real_models.lua_model("lstm", vocab=real_models.VOCAB, hidden=real_models.HIDDEN,
                                 layers=real_models.LAYERS)
    step = h.lstmLoop(ours, real_models.LAYERS, real_models.HIDDEN, luabridge.from_numpy(x),
                      luabridge.from_numpy(y), not args.eval)
    variants = [("default", "")] + [tuple(v.split("=", 1)) for v in args.variant]
    threads = [int(t) for t in args.threads.split(",")]
    best: dict = {}
    every: dict = {}
    for r in range(args.rounds + 1):
        for name, code in variants:
            for n in threads:
                if code:
                    prof.run(code)
                h.setThreads(n)
                step(2)
                if args.profile and r == args.rounds:
                    prof.reset()
                    prof.on = True
                c0, t0 = time.process_time(), time.perf_counter()
                step(args.reps)
                wall, cpu = (time.perf_counter() - t0) / args.reps, (time.process_time() - c0) / args.reps
                prof.on = False
                if args.profile and r == args.rounds:
                    print(f"--- {name}, {n} thread(s): {wall * 1e3:.2f} ms a step, "
                          f"products {prof.total() / args.reps * 1e3:.2f} ms a step (over {args.reps} steps)")
                    print(prof.report())
                    print(prof.worker())
                if args.reset:
                    prof.run(args.reset)
                if r == 0:
                    continue   # warm-up round
                key = (name, n)
                every.setdefault(key, []).append(wall)
                if key not in best or wall < best[key][0]:
                    best[key] = (wall, cpu)
    h.setThreads(os.cpu_count() or 1)
    print(f"load {open('/proc/loadavg').read().split()[:3]}; best of {args.rounds} rounds x {args.reps} steps, "
          f"batch {args.batch}, {'eval' if args.eval else 'train'}")
    for name, _ in variants:
        print(f"{name:>16}: " + "  ".join(
            f"{n}t {best[(name, n)][0] * 1e3:7.2f} ms (cpu {best[(name, n)][1] * 1e3:7.2f}, median "
            f"{float(np.median(every[(name, n)])) * 1e3:7.2f})" for n in threads))


if __name__ == "__main__":
    main()
