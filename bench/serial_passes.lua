-- Where a training step's serial fraction comes from: each pass's wall time and the CPU time of
-- every thread while it ran (bench/thread_clocks.lua: per-thread CPU clocks, nanoseconds), so
-- that the serial time bench/real_models.py reports (bench/machine.py serial_fraction: wall time
-- minus the workers' CPU time over threads - 1) splits into passes.
--   luabridge th bench/serial_passes.lua MODEL BATCH [REPS] [THREADS]   (e.g. resnet18 8 5 2)
-- MODEL: resnet18, lenet, dcgan (bench/real_models.lua) or mlp (784-512-512-10); the step is
-- bench/real_models.py's: zero the gradients, forward, criterion, backward, SGD update (DCGAN:
-- its forward in training mode). First REPS whole steps, timed as a whole only (the figure the
-- bench reports, here from the thread clocks); then REPS steps with every pass timed:
-- SERIAL_PASSES_MODE=modules (default but for resnet18) wraps each leaf module's passes (which
-- keeps a model from running as a whole-model plan); =plan (resnet18's default) wraps the plan's
-- calls and runs each oneDNN step of the plan on its own in order (SERIAL_PASSES_STEPS=0: the
-- plan's calls whole), leaving the plan in place; SERIAL_PASSES_TAIL=N also times the passes of
-- the last N modules. SERIAL_PASSES_MIN=ms: lines under it are left out (default 0.02).
-- Prints per pass (ms a step, the mean over REPS): wall, the calling thread's CPU, the other
-- threads' CPU, and serial = wall - min(others / (threads - 1), wall); "self" lines are a
-- parent's time outside the passes listed under it. blas.watchLoad is off: take the bench lock
-- and run at nice -20 on a shared machine.
require 'nn'
local here = debug.getinfo(1, 'S').source:sub(2):match('(.*/)') or './'
local clocks = dofile(here .. 'thread_clocks.lua')

local args = { ... }
if #args == 0 and rawget(_G, 'arg') then args = arg end
local name, batch = args[1] or 'lenet', tonumber(args[2] or 256)
local reps, threads = tonumber(args[3] or 5), tonumber(args[4] or 2)
local mode = os.getenv('SERIAL_PASSES_MODE') or (name == 'resnet18' and 'plan' or 'modules')
local splitSteps = os.getenv('SERIAL_PASSES_STEPS') ~= '0'
require('torch.backend.cpu.blas').watchLoad = false
torch.setnumthreads(threads)

local m = dofile(here .. 'step_models.lua')(name, batch)
local model, x, y, criterion, params, grads = m.model, m.x, m.y, m.criterion, m.params, m.grads

-- the timed passes: a stack of open records; each key's inclusive sums and its children's
local sums, order, stack = {}, {}, {}
local recording = false
local function timed(key, f)
  return function(...)
    if not recording then return f(...) end
    local s0 = clocks.snapshot()
    stack[#stack + 1] = { key = key, children = { wall = 0, main = 0, others = 0 } }
    local a, b = f(...)
    local d = clocks.diff(s0, clocks.snapshot())
    local top = table.remove(stack)
    local e = sums[key]
    if not e then
      e = { wall = 0, main = 0, others = 0, calls = 0, self = { wall = 0, main = 0, others = 0 },
            hasChildren = false, depth = #stack, per = {} }
      sums[key] = e
      order[#order + 1] = key
    end
    e.calls = e.calls + 1
    for _, k in ipairs { 'wall', 'main', 'others' } do
      e[k] = e[k] + d[k]
      e.self[k] = e.self[k] + d[k] - top.children[k]
    end
    for tid, t in pairs(d.per) do e.per[tid] = (e.per[tid] or 0) + t end
    if top.children.wall > 0 then e.hasChildren = true end
    local parent = stack[#stack]
    if parent then
      for _, k in ipairs { 'wall', 'main', 'others' } do parent.children[k] = parent.children[k] + d[k] end
    end
    return a, b
  end
end

local zero = timed('grads:zero', function() grads:zero() end)
local forward = timed('forward', function() return model:forward(x) end)
local crit = timed('criterion', function(out)
  criterion:forward(out, y)
  return criterion:backward(out, y)
end)
local backward = timed('backward', function(g) model:backward(x, g) end)
local update = timed('params:add(-lr, grads)', function() params:add(-0.01, grads) end)
local function step()
  if name == 'dcgan' then return forward() end
  zero()
  local out = forward()
  backward(crit(out))
  update()
end

-- times module m's own passes, as 'i type pass'
local wrapPasses = dofile(here .. 'time_passes.lua')
local function timePasses(i, m) wrapPasses(timed, i, m) end
if mode == 'modules' then
  local leaves = {}
  local function walk(m)
    if m.modules then for _, c in ipairs(m.modules) do walk(c) end else leaves[#leaves + 1] = m end
  end
  walk(model)
  for i, m in ipairs(leaves) do timePasses(i, m) end
end
-- SERIAL_PASSES_TAIL=N (plan mode): also each pass of the model's last N modules (those after
-- the plan's part: ResNet-18's average pooling, View and Linear are its last 3)
local tail = tonumber(os.getenv('SERIAL_PASSES_TAIL') or '0')
if mode == 'plan' and tail > 0 then
  local mods = model.modules
  for i = #mods - tail + 1, #mods do timePasses(i, mods[i]) end
end
-- the whole-model plans' calls (in either mode: a count of 0 says no plan ran)
local be = require('torch.backend').cpu
for _, k in ipairs { 'plan_train_forward', 'plan_train_backward', 'plan_conv_run' } do
  if be[k] then be[k] = timed(k, be[k]) end
end
local dnnl = require 'torch.backend.cpu.dnnl'
if dnnl.available and mode == 'plan' then
  local run = dnnl.run
  local runs = 0
  dnnl.run = function(plan, ...)
    if not recording then return run(plan, ...) end
    runs = runs + 1
    local list = {}
    for _, s in ipairs(plan.before) do list[#list + 1] = s end
    list[#list + 1] = plan.main
    for _, s in ipairs(plan.after) do list[#list + 1] = s end
    local parent = stack[#stack] and stack[#stack].key or 'step'
    if not splitSteps or #list < 2 then
      return timed(('%s: dnnl.run of %d'):format(parent:gsub('^%s+', ''), #list), run)(plan, ...)
    end
    local phase = parent:match('plan_train_(%a+)') or 'run'
    for i, s in ipairs(list) do
      local one = { before = {}, main = s, after = {}, user = i == 1 and plan.user or {}, threads = plan.threads }
      local key = ('  %s %03d %s'):format(phase, i, s.name or 'reorder')
      if i == 1 then timed(key, run)(one, ...) else timed(key, run)(one) end
    end
  end
end

-- warm up, then whole steps (the threads the libraries start exist by now)
for _ = 1, 3 do step() end
clocks.refresh()
local whole = { wall = 0, main = 0, others = 0, best = math.huge }
for _ = 1, reps do
  local s0 = clocks.snapshot()
  step()
  local d = clocks.diff(s0, clocks.snapshot())
  whole.wall, whole.main, whole.others = whole.wall + d.wall, whole.main + d.main, whole.others + d.others
  whole.best = math.min(whole.best, d.wall)
end
local function serial(wall, others)
  if threads < 2 then return wall end
  return wall - math.min(others / (threads - 1), wall)
end
-- the share of the one-thread work that ran on one thread (bench/machine.py serial_fraction)
local function fraction(wall, others)
  local s = serial(wall, others)
  local par = wall - s
  return s / math.max(s + threads * par, 1e-12)
end

recording = true
step()   -- the split plan steps make their own records; one step to settle
for k in pairs(sums) do sums[k] = nil end
for i = #order, 1, -1 do order[i] = nil end
local passes = { wall = 0, others = 0 }
for _ = 1, reps do
  local s0 = clocks.snapshot()
  step()
  local d = clocks.diff(s0, clocks.snapshot())
  passes.wall, passes.others = passes.wall + d.wall, passes.others + d.others
end
recording = false

local names = {}
for _, tid in ipairs(clocks.refresh()) do names[tid] = clocks.name(tid) end
local function ms(v) return v / reps * 1e3 end
print(('%s batch %d, %d threads, mode %s, %d steps each'):format(name, batch, threads, mode, reps))
print(('whole step (no pass timed): wall %.2f ms (best %.2f), main CPU %.2f, others %.2f, serial %.2f ms, '
  .. 'serial fraction %.3f'):format(ms(whole.wall), whole.best * 1e3, ms(whole.main), ms(whole.others),
  ms(serial(whole.wall, whole.others)), fraction(whole.wall, whole.others)))
print(('with passes timed: wall %.2f ms, serial %.2f ms, serial fraction %.3f'):format(ms(passes.wall),
  ms(serial(passes.wall, passes.others)), fraction(passes.wall, passes.others)))
print(('%-52s %8s %8s %8s %8s %6s  %s'):format('pass (ms a step)', 'wall', 'main', 'others', 'serial',
  'calls', 'busiest other thread'))
local minShown = tonumber(os.getenv('SERIAL_PASSES_MIN') or '0.02')
local listed, listedOthers = 0, 0
for _, k in ipairs(order) do
  local e = sums[k]
  local busiest, most = nil, 0
  for tid, t in pairs(e.per) do if t > most then busiest, most = tid, t end end
  local line = ('%-52s %8.3f %8.3f %8.3f %8.3f %6d  %s'):format(('  '):rep(e.depth) .. k, ms(e.wall), ms(e.main),
    ms(e.others), ms(serial(e.wall, e.others)), e.calls / reps,
    busiest and ('%d %s %.3f'):format(busiest, names[busiest] or '(ended)', ms(most)) or '-')
  if ms(e.wall) >= minShown or ms(serial(e.wall, e.others)) >= minShown then print(line) end
  if e.depth == 0 then listed, listedOthers = listed + e.wall, listedOthers + e.others end
  if e.hasChildren then
    local s = e.self
    print(('%-52s %8.3f %8.3f %8.3f %8.3f'):format(('  '):rep(e.depth + 1) .. 'self', ms(s.wall), ms(s.main),
      ms(s.others), ms(serial(s.wall, s.others))))
  end
end
local bw, bo = passes.wall - listed, passes.others - listedOthers
print(('%-52s %8.3f %8s %8.3f %8.3f'):format('between the top-level passes', ms(bw), '', ms(bo), ms(serial(bw, bo))))
