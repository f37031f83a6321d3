"""A threads data loader, as fb.resnet.torch's: samples per second at 1 and 2 workers.

    python bench/threads_loader.py [--samples N] [--batch B] [--repeats R] [--workers 1,2]

Each sample is fb.resnet.torch's training preprocessing (datasets/transforms.lua) of a 256x256
JPEG held in memory: decode (image.decompressJPG), a random 224x224 crop, colour jitter
(brightness, contrast, saturation blended against the grey image, in random order), AlexNet-style
PCA lighting noise, per-channel normalisation, and a horizontal flip half the time. A pool of
`threads` workers (each an OS thread with its own Lua runtime) fills batches of B samples, as
fb.resnet.torch's dataloader.lua: acceptsjob / addjob / dojob, the endcallback keeping the
batch. "main thread" is the same work in a plain loop, without a pool.

Then a training loop fed by the loader (a small conv net on the batches, SGD) against the same
loop loading each batch itself on the main thread: the pool overlaps loading with training.

Each figure is the best of R runs. ratio = 2 workers / 1 worker. Workers run Lua in parallel
(lupa releases the GIL while Lua runs) and take the GIL only to call into Python: once per
sample, to decode its JPEG (lua/image/files.lua reads the header in Lua; imaging.decode_into has
Pillow decode into a buffer of its own, the decoder itself running without the GIL), and now and
then to allocate a buffer the worker's runtime has not got for reuse (torch.memory.reuse). On
Linux a run of each pool size then says how each worker spent the timed part (/proc schedstat):
on a CPU, waiting for a CPU (the machine's other load), or blocked (waiting for the GIL, a lock,
or for a job: the last batch leaves one worker idle): the blocked share is the GIL's cost,
however busy the machine is.
"""
from __future__ import annotations

import argparse
import os
import threading
import time
from typing import Any, Callable

import luabridge
from machine import cores, cpu_name

PIPELINE = r"""
require 'image'
require 'nn'
local threads = require 'threads'
local side, crop = 256, 224

-- the data set: JPEGs of smooth random images (as photographs compress), in memory
torch.manualSeed(1)
local jpgs = {}
for i = 1, 24 do
  jpgs[i] = image.compressJPG(image.scale(torch.rand(3, 16, 16), side, side, 'bilinear'), 90)
end

-- fb.resnet.torch's training transforms (ImageNet statistics)
local mean, std = {0.485, 0.456, 0.406}, {0.229, 0.224, 0.225}
local eigval = torch.Tensor{0.2175, 0.0188, 0.0045}
local eigvec = torch.Tensor{{-0.5675, 0.7192, 0.4009}, {-0.5808, -0.0045, -0.8140}, {-0.5836, -0.6948, 0.4203}}

local function grey(dst, img)
  dst:resizeAs(img)
  dst[1]:zero():add(0.299, img[1]):add(0.587, img[2]):add(0.114, img[3])
  dst[2]:copy(dst[1]); dst[3]:copy(dst[1])
  return dst
end
local function blend(img1, img2, alpha) return img1:mul(alpha):add(1 - alpha, img2) end
local function brightness(input) return blend(input, input.new():resizeAs(input):zero(), 1 + torch.uniform(-0.4, 0.4)) end
local function contrast(input)
  local gs = grey(input.new(), input)
  gs:fill(gs[1]:mean())
  return blend(input, gs, 1 + torch.uniform(-0.4, 0.4))
end
local function saturation(input) return blend(input, grey(input.new(), input), 1 + torch.uniform(-0.4, 0.4)) end
local function colorJitter(input)
  local order = torch.randperm(3)
  local ts = {brightness, contrast, saturation}
  for i = 1, 3 do input = ts[order[i]](input) end
  return input
end
local function lighting(input)
  local alpha = torch.Tensor(3):normal(0, 0.1)
  local rgb = eigvec:clone():cmul(alpha:view(1, 3):expand(3, 3)):cmul(eigval:view(1, 3):expand(3, 3)):sum(2):squeeze()
  input = input:clone()
  for i = 1, 3 do input[i]:add(rgb[i]) end
  return input
end

local function preprocess(jpg)
  local input = image.decompressJPG(jpg, 3, 'float')
  local x1, y1 = torch.random(0, side - crop), torch.random(0, side - crop)
  input = image.crop(input, x1, y1, x1 + crop, y1 + crop)
  input = lighting(colorJitter(input))
  for c = 1, 3 do input[c]:add(-mean[c]):div(std[c]) end
  if torch.uniform() < 0.5 then input = image.hflip(input) end
  return input
end

local function loadBatch(first, batchSize)
  local batch = torch.FloatTensor(batchSize, 3, crop, crop)
  for i = 1, batchSize do batch[i]:copy(preprocess(jpgs[(first + i - 2) % #jpgs + 1])) end
  return batch
end

-- fb.resnet.torch's dataloader.lua: keep the queue full, take one batch per step
local function poolLoader(nThreads)
  local pool = threads.Threads(nThreads,
    function() require 'image'; torch.setnumthreads(1) end,
    function(idx) torch.manualSeed(idx); _G.loadBatch = loadBatch end)
  return pool, function(nBatches, batchSize, onBatch)
    local queued, batch = 0, nil
    local function enqueue()
      while queued < nBatches and pool:acceptsjob() do
        queued = queued + 1
        pool:addjob(function(first, n) return _G.loadBatch(first, n) end, function(b) batch = b end,
                    (queued - 1) * batchSize + 1, batchSize)
      end
    end
    for _ = 1, nBatches do
      enqueue()
      pool:dojob()
      onBatch(batch)
    end
  end
end

local function mainLoader(nBatches, batchSize, onBatch)
  for b = 1, nBatches do onBatch(loadBatch((b - 1) * batchSize + 1, batchSize)) end
end

-- seconds fn takes; mark (optional, a Python function) is called with true before, false after
local function timed(fn, mark)
  collectgarbage()
  if mark then mark(true) end
  local timer = torch.Timer()
  fn()
  local seconds = timer:time().real
  if mark then mark(false) end
  return seconds
end

local bench = {}

-- samples per second loading nBatches batches (nThreads 0: on the main thread)
function bench.load(nThreads, nBatches, batchSize, mark)
  local last
  local function keep(b) last = b end   -- as fb.resnet.torch's endcallback: sample = _sample_
  if nThreads == 0 then
    return nBatches * batchSize / timed(function() mainLoader(nBatches, batchSize, keep) end)
  end
  local pool, run = poolLoader(nThreads)
  run(1, batchSize, keep)   -- warm the workers up
  local seconds = timed(function() run(nBatches, batchSize, keep) end, mark)
  pool:terminate()
  return nBatches * batchSize / seconds
end

-- samples per second of a training loop fed by the loader (nThreads 0: loading on the main thread)
function bench.train(nThreads, nBatches, batchSize)
  torch.manualSeed(2)
  local model = nn.Sequential()
    :add(nn.SpatialConvolution(3, 16, 7, 7, 4, 4)):add(nn.ReLU()):add(nn.SpatialMaxPooling(3, 3, 3, 3))
    :add(nn.SpatialConvolution(16, 32, 3, 3, 2, 2)):add(nn.ReLU())
    :add(nn.View(-1):setNumInputDims(3)):add(nn.Linear(32 * 8 * 8, 10)):add(nn.LogSoftMax())
  model:float()
  local criterion = nn.ClassNLLCriterion():float()
  local params, grads = model:getParameters()
  local target = torch.FloatTensor(batchSize):random(1, 10)
  local function step(batch)
    grads:zero()
    local out = model:forward(batch)
    criterion:forward(out, target)
    model:backward(batch, criterion:backward(out, target))
    params:add(-0.01, grads)
  end
  if nThreads == 0 then
    return nBatches * batchSize / timed(function() mainLoader(nBatches, batchSize, step) end)
  end
  local pool, run = poolLoader(nThreads)
  run(1, batchSize, step)
  local seconds = timed(function() run(nBatches, batchSize, step) end)
  pool:terminate()
  return nBatches * batchSize / seconds
end

return bench
"""


def best(fn, *args, repeats: int) -> float:
    return max(fn(*args) for _ in range(repeats))


def _schedstat(tid: int) -> tuple[float, float] | None:
    """Seconds thread tid has run on a CPU and waited runnable for one (Linux's schedstat)."""
    try:
        with open(f"/proc/self/task/{tid}/schedstat") as f:
            on_cpu, waiting, _ = f.read().split()
    except OSError:
        return None
    return int(on_cpu) / 1e9, int(waiting) / 1e9


def worker_time_shares(run: Callable[[Callable[[bool], None]], Any]) -> list[tuple[float, float, float]]:
    """For each pool worker, over the timed part of run(mark) (between mark(True) and
    mark(False)): the shares of that time it spent on a CPU, waiting for a CPU (other load), and
    blocked (waiting for the GIL, a lock, or a job). The blocked share is what the GIL costs a
    worker, whatever else the machine runs (the last batch leaves one worker waiting too)."""
    marks: list[tuple[float, dict[int, tuple[float, float]]]] = []

    def mark(_started: bool) -> None:
        stats = {}
        for t in threading.enumerate():
            stat = t.name.startswith("luabridge-threads-") and t.native_id and _schedstat(t.native_id)
            if stat:
                stats[t.native_id] = stat
        marks.append((time.perf_counter(), stats))

    run(mark)
    (t0, first), (t1, last) = marks
    shares = []
    for tid, (cpu0, wait0) in first.items():
        if tid in last and t1 > t0:
            cpu, wait = (last[tid][0] - cpu0) / (t1 - t0), (last[tid][1] - wait0) / (t1 - t0)
            shares.append((cpu, wait, 1 - cpu - wait))
    return shares


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=1024, help="samples per run (default 1024)")
    parser.add_argument("--batch", type=int, default=16, help="samples per job (default 16)")
    parser.add_argument("--repeats", type=int, default=2, help="runs per figure; the best is shown (default 2)")
    parser.add_argument("--workers", default="1,2", help="pool sizes to time (default 1,2)")
    args = parser.parse_args()
    bench = luabridge.execute(PIPELINE)
    batches = max(1, args.samples // args.batch)
    workers = [int(w) for w in args.workers.split(",")]
    print(f"{cpu_name()}, {cores()} cores; {batches} batches of {args.batch} 224x224 samples; best of {args.repeats}")
    rates = {w: best(bench.load, w, batches, args.batch, repeats=args.repeats) for w in [0, *workers]}
    print("loading (samples/s):")
    print(f"  main thread, no pool   {rates[0]:8.1f}")
    for w in workers:
        print(f"  pool of {w} worker{'s' if w > 1 else ' '}       {rates[w]:8.1f}")
    if 1 in rates and 2 in rates:
        print(f"  ratio 2 workers / 1    {rates[2] / rates[1]:8.2f}")
    if os.path.isdir("/proc/self/task"):
        for w in workers:
            shares = worker_time_shares(lambda mark, w=w: bench.load(w, batches, args.batch, mark))
            print(f"  pool of {w}: each worker's time on a CPU / waiting for one / blocked: "
                  + ", ".join(f"{c:.0%} / {q:.0%} / {b:.0%}" for c, q, b in shares))
    serial = best(bench.train, 0, batches, args.batch, repeats=args.repeats)
    fed = best(bench.train, max(workers), batches, args.batch, repeats=args.repeats)
    print("training fed by the loader (samples/s):")
    print(f"  loading on the main thread  {serial:8.1f}")
    print(f"  pool of {max(workers)} workers          {fed:8.1f}   ratio {fed / serial:.2f}")


if __name__ == "__main__":
    main()
