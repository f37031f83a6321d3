-- Per-pass times of a conv net's training step (bench/real_models.lua's models) at several
-- thread counts: for each leaf module and pass (forward, gradInput, accGrad), the best wall time
-- of `reps` steps, and the process CPU time over all of them / their wall time (the threads it
-- kept busy; the kernel counts other threads' time at its ticks, so short passes need many reps).
--   luabridge th bench/conv_passes.lua MODEL BATCH [REPS] [THREADS...]   (e.g. lenet 256 10 1 2)
-- blas.watchLoad is off: thread counts are those asked, whatever else runs.
require 'nn'
local ffi = require 'ffi'
pcall(ffi.cdef, [[
typedef struct { long tv_sec; long tv_nsec; } conv_passes_timespec;
int clock_gettime(int clk, conv_passes_timespec *tp);
]])
local ts = ffi.new('conv_passes_timespec')
local function clock(id) ffi.C.clock_gettime(id, ts); return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9 end
local function wall() return clock(1) end
local function cpu() return clock(2) end

local args = { ... }
if #args == 0 and rawget(_G, "arg") then args = arg end
local name, batch, reps = args[1] or 'lenet', tonumber(args[2] or 256), tonumber(args[3] or 10)
local counts = {}
for i = 4, #args do counts[#counts + 1] = tonumber(args[i]) end
if #counts == 0 then counts = { 1, 2 } end
require('torch.backend.cpu.blas').watchLoad = false
-- CONV_PASSES_BEFORE=1: the kernel choices before issue 25's dnnl-layers work (the conv rule
-- of conv.dnnlChannels then, blocked layouts only, average pooling on the loops)
if os.getenv('CONV_PASSES_BEFORE') == '1' then
  local channels = require('torch.backend.cpu.nn_conv').dnnlChannels
  channels.fill = math.huge
  local convdnnl = require 'torch.backend.cpu.dnnl_nn'
  convdnnl.pooling.average, convdnnl.channelsLast = false, false
end

local here = debug.getinfo(1, 'S').source:sub(2):match('(.*/)') or './'
local models = dofile(here .. 'real_models.lua')
torch.manualSeed(1)
local inputs = { lenet = { 1, 28, 28 }, resnet18 = { 3, 224, 224 }, vgg = { 3, 32, 32 }, dcgan = { 100, 1, 1 } }
local classes = { lenet = 10, resnet18 = 1000, vgg = 10 }
local model = models[name]():float()
local s = inputs[name]
local x = torch.FloatTensor(batch, s[1], s[2], s[3]):normal()
local criterion, y
if classes[name] then
  criterion = nn.CrossEntropyCriterion():float()
  if name == 'lenet' then criterion = nn.ClassNLLCriterion():float() end
  y = torch.LongTensor(batch):random(1, classes[name])
else
  criterion = nn.MSECriterion():float()
end
model:training()
-- as bench/real_models.lua's trainer: no gradient for the input batch
if model.modules then model.modules[1].gradInput = nil end
local params, grads = model:getParameters()

-- wrap every leaf's passes
local stats, order = {}, {}
local leaves = {}
local function walk(m)
  if m.modules then for _, c in ipairs(m.modules) do walk(c) end else leaves[#leaves + 1] = m end
end
walk(model)
for i, m in ipairs(leaves) do
  -- a module with its own backward (batch normalization) is timed there
  local passes = m.backward ~= nn.Module.backward and { 'updateOutput', 'backward' }
    or { 'updateOutput', 'updateGradInput', 'accGradParameters' }
  for _, pass in ipairs(passes) do
    local f = m[pass]
    local key = ('%02d %s %s'):format(i, torch.type(m):gsub('^nn%.', ''), pass)
    order[#order + 1] = key
    m[pass] = function(self, ...)
      local w0, c0 = wall(), cpu()
      local r = f(self, ...)
      local e = stats[key]
      if not e then e = { wall = 0, cpu = 0 }; stats[key] = e end
      e.wall, e.cpu = e.wall + wall() - w0, e.cpu + cpu() - c0
      return r
    end
  end
end

local function step()
  grads:zero()
  local out = model:forward(x)
  local go
  if y then criterion:forward(out, y); go = criterion:backward(out, y)
  else go = out:clone():normal() end
  model:backward(x, go)
  params:add(-0.01, grads)
end

-- the counts alternate step by step (a machine shared with other work slows them alike)
local results = {}
for _, n in ipairs(counts) do
  torch.setnumthreads(n)
  step(); step()
  results[n] = { best = {}, sum = {}, total = math.huge }
end
for _ = 1, reps do
  for _, n in ipairs(counts) do
    torch.setnumthreads(n)
    local r = results[n]
    for _, k in ipairs(order) do stats[k] = { wall = 0, cpu = 0 } end
    local w0 = wall()
    step()
    r.total = math.min(r.total, wall() - w0)
    for _, k in ipairs(order) do
      local b, t = r.best[k], r.sum[k] or { wall = 0, cpu = 0 }
      if not b or stats[k].wall < b.wall then r.best[k] = stats[k] end
      t.wall, t.cpu = t.wall + stats[k].wall, t.cpu + stats[k].cpu
      r.sum[k] = t
    end
  end
end

local head = { ('%-40s'):format(('%s batch %d'):format(name, batch)) }
for _, n in ipairs(counts) do head[#head + 1] = ('%9s %5s'):format(n .. 't ms', 'cpu/w') end
print(table.concat(head, ' '))
for _, k in ipairs(order) do
  local r1 = results[counts[1]].best[k]
  if r1.wall > 1e-4 then
    local line = { ('%-40s'):format(k) }
    for _, n in ipairs(counts) do
      local r = results[n].best[k]
      local t = results[n].sum[k]
      line[#line + 1] = ('%9.2f %5.2f'):format(r.wall * 1e3, t.cpu / math.max(t.wall, 1e-9))
    end
    print(table.concat(line, ' '))
  end
end
local line = { ('%-40s'):format('whole step (best)') }
for _, n in ipairs(counts) do line[#line + 1] = ('%9.2f %5s'):format(results[n].total * 1e3, '') end
print(table.concat(line, ' '))
