-- Per-pass times of a training step (bench/real_models.lua's LeNet, DCGAN's generator, or
-- bench/nn_models.py's 784-512-512-10 MLP; DCGAN: its forward in training mode, as
-- bench/real_models.py's row) under several configurations that alternate step by step in one
-- process: thread count and the switches of the threaded paths. TWO_THREADS_WHOLE=1: whole steps
-- only (timing a pass makes it an instance method, which keeps the model from running as a plan).
--   luabridge th bench/two_threads.lua MODEL BATCH REPS CONFIG...
-- CONFIG: a thread count, then optional switches after colons, e.g. 1, 2, 2:loops=0,
-- 2:split=0, 2:gemm=8e6 (blas.minWork.gemm), 2:short=5e5 (blas.minWork.gemmShortK),
-- 2:least=4e6 (conv_threads.LEAST), 1:plans=0 (nn.plans.enabled),
-- 2:tanh=262144 (dnnl_eltwise.limits.ef.Tanh's least), 2:nhwc=0 / 2:nhwc=noback (oneDNN's
-- convolutions blocked everywhere / gradInput always blocked: dnnl_nn.lua's convdnnl.nhwc).
-- Prints each pass's best wall time (ms) and the process CPU time over the wall time of all its
-- runs, per configuration, then the whole step's best and median. blas.watchLoad is off: thread
-- counts are those asked, whatever else runs (take the bench lock; run at nice -20).
require 'nn'
local timer = torch.Timer()
local function wall() return timer:time().real end
local cpu = os.clock   -- the process's CPU time (every thread's)

local argv = { ... }
if #argv == 0 then argv = rawget(_G, "arg") or {} end
local name, batch, reps = argv[1] or 'lenet', tonumber(argv[2] or 64), tonumber(argv[3] or 20)
local specs = { select(4, unpack(argv)) }
if #specs == 0 then specs = { '1', '2:loops=0', '2' } end

local blas = require 'torch.backend.cpu.blas'
-- (an older tree may lack a switch's module: its switch then changes nothing)
local function optional(name) local ok, m = pcall(require, name); return ok and m or {} end
local parallel = optional 'torch.backend.cpu.parallel'
local nnConv = optional 'torch.backend.cpu.nn_conv'
local convThreads = optional 'torch.backend.cpu.conv_threads'
local eltwise = optional 'torch.backend.cpu.dnnl_eltwise'
local tanhLimit = eltwise.limits and eltwise.limits.ef.Tanh
local convdnnl = optional 'torch.backend.cpu.dnnl_nn'
local nhwcRule = convdnnl.nhwc
blas.watchLoad = false

-- the settings a configuration changes, and their values now (restored before each config)
local defaults = {
  loops = parallel.enabled, split = nnConv.splitBatch, gemm = blas.minWork.gemm,
  short = blas.minWork.gemmShortK, least = convThreads.LEAST,
  plans = nn.plans.enabled, tanh = tanhLimit, nhwc = 'rule',
}
local setters = {
  loops = function(v) parallel.enabled = v ~= '0' and v ~= false end,
  split = function(v) nnConv.splitBatch = v ~= '0' and v ~= false end,
  gemm = function(v) blas.minWork.gemm = tonumber(v) end,
  short = function(v) blas.minWork.gemmShortK = tonumber(v) end,
  least = function(v) convThreads.LEAST = tonumber(v) end,
  plans = function(v) nn.plans.enabled = v ~= '0' and v ~= false end,
  nhwc = function(v)
    if not nhwcRule then return end
    convdnnl.nhwc = v == 'rule' and nhwcRule or v == '0' and function() return false end
      or function(C, O, pass) return pass ~= 'backward' and nhwcRule(C, O, pass) end
  end,
  tanh = function(v)
    if eltwise.limits then
      eltwise.limits.ef.Tanh = type(v) == 'table' and v or { one = tanhLimit.one, least = tonumber(v) }
    end
  end,
}
local configs = {}
for _, s in ipairs(specs) do
  local parts = {}
  for p in s:gmatch('[^:]+') do parts[#parts + 1] = p end
  local c = { name = s, threads = tonumber(parts[1]), set = {} }
  for i = 2, #parts do
    local k, v = parts[i]:match('^(%w+)=(.*)$')
    assert(k and setters[k], 'unknown switch in ' .. s)
    c.set[k] = v
  end
  configs[#configs + 1] = c
end
local function apply(c)
  for k, f in pairs(setters) do f(defaults[k]) end
  for k, v in pairs(c.set) do setters[k](v) end
  torch.setnumthreads(c.threads)
end

local here = debug.getinfo(1, 'S').source:sub(2):match('(.*/)') or './'
local models = dofile(here .. 'real_models.lua')
torch.manualSeed(1)
local shapes = { lenet = { 1, 28, 28 }, mlp = { 784 }, dcgan = { 100, 1, 1 } }
local model = models[name]():float()
local x = torch.FloatTensor(batch, unpack(shapes[name])):normal()
local criterion, y
if name == 'dcgan' then
  criterion = nn.MSECriterion():float()
  y = model:forward(x):clone():normal()
else
  criterion = nn.ClassNLLCriterion():float()
  y = torch.LongTensor(batch):random(1, 10)
end
model:training()
model.modules[1].gradInput = nil   -- as bench/real_models.lua's trainer
local params, grads = model:getParameters()

local stats, order = {}, {}
local function timed(key, f)
  order[#order + 1] = key
  return function(...)
    local w0, c0 = wall(), cpu()
    local a, b = f(...)
    local e = stats[key]
    e.wall, e.cpu = e.wall + wall() - w0, e.cpu + cpu() - c0
    return a, b
  end
end
-- TWO_THREADS_WHOLE=1: whole steps only (a wrapped pass is an instance method, which keeps the
-- model from running as a plan, lua/nn/util/plan_conv.lua)
local whole = os.getenv('TWO_THREADS_WHOLE') == '1'
local wrapPasses = dofile(here .. 'time_passes.lua')
for i, m in ipairs(whole and {} or model.modules) do wrapPasses(timed, i, m) end
local zero = timed('grads:zero', function() grads:zero() end)
local crit = timed('criterion', function(out)
  criterion:forward(out, y)
  return criterion:backward(out, y)
end)
local update = timed('params:add(-lr, grads)', function() params:add(-0.01, grads) end)

local function step()
  if name == 'dcgan' then return model:forward(x) end   -- bench/real_models.py's row: forward, training mode
  zero()
  local out = model:forward(x)
  model:backward(x, crit(out))
  update()
end

-- per configuration (by its index: a name may repeat) each pass's best run and its sums, and
-- the whole steps' times
local results = {}
for i, c in ipairs(configs) do
  apply(c)
  for _, k in ipairs(order) do stats[k] = { wall = 0, cpu = 0 } end
  step(); step()
  results[i] = { best = {}, sum = {}, totals = {} }
  for _, k in ipairs(order) do results[i].sum[k] = { wall = 0, cpu = 0 } end
end
for _ = 1, reps do
  for i, c in ipairs(configs) do
    apply(c)
    local r = results[i]
    for _, k in ipairs(order) do stats[k] = { wall = 0, cpu = 0 } end
    local w0 = wall()
    step()
    r.totals[#r.totals + 1] = wall() - w0
    for _, k in ipairs(order) do
      local now, sum = stats[k], r.sum[k]
      r.best[k] = (r.best[k] and r.best[k].wall <= now.wall) and r.best[k] or now
      sum.wall, sum.cpu = sum.wall + now.wall, sum.cpu + now.cpu
    end
  end
end
apply({ set = {}, threads = torch.getnumthreads() })

local head = { ('%-36s'):format(('%s batch %d'):format(name, batch)) }
for _, c in ipairs(configs) do head[#head + 1] = ('%12s %4s'):format(c.name, 'cpu') end
print(table.concat(head, ' '))
for _, k in ipairs(order) do
  local line = { ('%-36s'):format(k) }
  for i in ipairs(configs) do
    local r, t = results[i].best[k], results[i].sum[k]
    line[#line + 1] = ('%12.3f %4.2f'):format(r.wall * 1e3, t.cpu / math.max(t.wall, 1e-9))
  end
  print(table.concat(line, ' '))
end
for _, what in ipairs { 'best', 'median' } do
  local line = { ('%-36s'):format('whole step (' .. what .. ')') }
  for i in ipairs(configs) do
    local t = results[i].totals
    table.sort(t)
    local v = what == 'best' and t[1] or t[math.floor((#t + 1) / 2)]
    line[#line + 1] = ('%12.3f %4s'):format(v * 1e3, '')
  end
  print(table.concat(line, ' '))
end
