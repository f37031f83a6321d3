-- Whole training steps of bench/real_models.py's rows under several configurations, alternating
-- step by step in one process: each configuration's best and median wall time, and its serial
-- fraction from the thread clocks (bench/thread_clocks.lua; bench/machine.py's definition: the
-- wall time minus the other threads' CPU over threads - 1, as a share of the one-thread work).
--   luabridge th bench/serial_ab.lua MODEL BATCH REPS CONFIG...
-- MODEL as bench/step_models.lua. CONFIG: a thread count, then switches after colons:
-- axpy=0 (BLAS axpy on one thread: blas.minWork.axpy = math.huge), zero=0 (zeroing on one
-- thread), loops=0 (torch.backend.cpu.parallel off), ftz=1 (flush denormals to zero on this
-- thread, oneDNN's OpenMP workers and the parallel loops' workers: torch.setflushdenormal),
-- e.g. `resnet18 8 10 1 2 2:axpy=0:zero=0`. blas.watchLoad is off: take the bench lock, nice -20.
require 'nn'
local here = debug.getinfo(1, 'S').source:sub(2):match('(.*/)') or './'
local clocks = dofile(here .. 'thread_clocks.lua')
local args = { ... }
if #args == 0 and rawget(_G, 'arg') then args = arg end
local name, batch, reps = args[1] or 'lenet', tonumber(args[2] or 64), tonumber(args[3] or 10)
local specs = { select(4, unpack(args)) }
if #specs == 0 then specs = { '1', '2' } end

local blas = require 'torch.backend.cpu.blas'
blas.watchLoad = false
local parallel = require 'torch.backend.cpu.parallel'
local zeroThreads = require('torch.backend.cpu.pointwise').zeroThreads
local defaults = { axpy = blas.minWork.axpy, zero = zeroThreads and zeroThreads.least, loops = parallel.enabled }
local setters = {
  axpy = function(v) blas.minWork.axpy = (v == '0') and math.huge or defaults.axpy end,
  zero = function(v) if zeroThreads then zeroThreads.least = (v == '0') and math.huge or defaults.zero end end,
  loops = function(v) parallel.enabled = v ~= '0' and defaults.loops end,
  ftz = function(v) if torch.setflushdenormal then torch.setflushdenormal(v == '1') end end,
}
local configs = {}
for _, s in ipairs(specs) do
  local parts = {}
  for p in s:gmatch('[^:]+') do parts[#parts + 1] = p end
  local c = { name = s, threads = tonumber(parts[1]), set = {}, times = {}, wall = 0, others = 0 }
  for i = 2, #parts do
    local k, v = parts[i]:match('^(%w+)=(.*)$')
    assert(k and setters[k], 'serial_ab: unknown switch in ' .. s)
    c.set[k] = v
  end
  configs[#configs + 1] = c
end
local function apply(c)
  for k, f in pairs(setters) do f(k == 'ftz' and '0' or nil) end
  for k, v in pairs(c.set) do setters[k](v) end
  torch.setnumthreads(c.threads)
end

local m = dofile(here .. 'step_models.lua')(name, batch)
for _, c in ipairs(configs) do apply(c); m.step(); m.step() end
clocks.refresh()
for _ = 1, reps do
  for _, c in ipairs(configs) do
    apply(c)
    local s0 = clocks.snapshot()
    m.step()
    local d = clocks.diff(s0, clocks.snapshot())
    c.times[#c.times + 1] = d.wall
    c.wall, c.others = c.wall + d.wall, c.others + d.others
  end
end
apply({ threads = torch.getnumthreads(), set = {} })
print(('%s batch %d, %d steps per configuration, alternating'):format(name, batch, reps))
print(('%-28s %10s %10s %10s %8s'):format('configuration', 'best ms', 'median ms', 'serial ms', 'serial'))
for _, c in ipairs(configs) do
  table.sort(c.times)
  local n = c.threads
  local serial = n > 1 and c.wall - math.min(c.others / (n - 1), c.wall) or c.wall
  local frac = n > 1 and serial / math.max(serial + n * (c.wall - serial), 1e-12) or 1
  print(('%-28s %10.2f %10.2f %10.2f %8.3f'):format(c.name, c.times[1] * 1e3,
    c.times[math.floor((#c.times + 1) / 2)] * 1e3, serial / reps * 1e3, frac))
end
