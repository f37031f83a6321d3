-- Where char-rnn's LSTM training step (bench/real_models.lua's lstm and lstmLoop: 2 layers of 128,
-- 50 clones, batch 32, float32, 1 thread) spends its time outside the products.
--
--   luabridge th bench/lstm_profile.lua [mode] [steps] [batch]
--
-- modes:
--   modules  (default) wall time inside each module type's updateOutput / updateGradInput /
--            accGradParameters (class methods wrapped with a monotonic clock; a module called
--            inside another counts in both), the plan's fused chains, the criterion, and the
--            step's total; the wrappers cost a little each call
--            and, per pass, the plan's node steps (modules included)
--   sample   LuaJIT's sampling profiler (jit.profile, 1 ms; LSTM_SAMPLE=li1 for lines,
--            LSTM_VMSTATE=1 to add the VM state): the share of samples by leaf frame and by the
--            innermost frame under lua/nn*, lua/nngraph
--   length   the training step's time per time step for sequences of 1 to 50 steps (the clones'
--            buffers in the caches or not)
--   ab       the step with this session's plan changes off and on, alternating (steps: rounds)
--   time     the best step
--   aborts   the traces LuaJIT aborts or leaves while running the step (jit.attach): where, and
--            the error number (lj_traceerr.h's order)
-- LSTM_STEPS=n sets the sequence's length (50); LSTM_EVAL=1 makes ab time the forward in
-- evaluation mode.
local mode, steps, batch = arg[1] or 'modules', tonumber(arg[2]) or 20, tonumber(arg[3]) or 32
require 'nn'
require 'nngraph'
local ffi = require 'ffi'
local models = dofile('bench/real_models.lua')
require('torch.backend.cpu.blas').watchLoad = false
torch.setnumthreads(1)

local vocab, hidden, layers, T = 65, 128, 2, tonumber(os.getenv('LSTM_STEPS') or 50)
torch.manualSeed(1)
local proto = models.lstm(vocab, hidden, layers):float()
local x = torch.LongTensor(T, batch):random(1, vocab)
local y = torch.LongTensor(T, batch):random(1, vocab)
local loop = models.lstmLoop(proto, layers, hidden, x, y, 0.01, true)

pcall(ffi.cdef, 'typedef struct { long s; long ns; } lstmprof_ts; int lstmprof_gettime(int, lstmprof_ts *) __asm__("clock_gettime");')
local ts = ffi.new('lstmprof_ts')
local function now() ffi.C.lstmprof_gettime(1, ts); return tonumber(ts.s) + tonumber(ts.ns) * 1e-9 end

loop(3)   -- plans made, traces compiled

local function best(n)
  local b = math.huge
  for _ = 1, n do
    local t0 = now()
    loop(1)
    b = math.min(b, now() - t0)
  end
  return b
end

if mode == 'modules' then
  local stats, order = {}, {}
  local function add(key, dt)
    local s = stats[key]
    if not s then s = { n = 0, t = 0 }; stats[key] = s; order[#order + 1] = key end
    s.n, s.t = s.n + 1, s.t + dt
  end
  local wrapped = {}
  local function wrap(cls, name, label)
    local f = rawget(cls, name)
    if not f or wrapped[f] then return end
    local key = label .. ':' .. name
    local g = function(...)
      local t0 = now()
      local a, b = f(...)
      add(key, now() - t0)
      return a, b
    end
    wrapped[g] = true
    cls[name] = g
  end
  for _, t in ipairs { 'Linear', 'LogSoftMax', 'OneHot', 'CAddTable', 'CMulTable', 'Sigmoid', 'Tanh',
                       'SplitTable', 'Reshape', 'Identity', 'ClassNLLCriterion', 'gModule' } do
    local cls = assert(torch.getmetatable('nn.' .. t), t)
    for _, name in ipairs { 'updateOutput', 'updateGradInput', 'accGradParameters', 'backward', 'forward' } do
      wrap(cls, name, t)
    end
  end
  local plan = require 'nngraph.plan'
  -- the node steps a plan runs (modules included), by pass
  for _, name in ipairs { 'forward', 'backward', 'acc' } do
    local f = plan[name]
    local label = 'plan:' .. name .. ' node steps'
    local function timed(step)
      return function(...)
        local t0 = now()
        step(...)
        add(label, now() - t0)
      end
    end
    if name == 'backward' then
      plan[name] = function(gm, P, g, step, ...) return f(gm, P, g, timed(step), ...) end
    else
      plan[name] = function(gm, P, step, ...) return f(gm, P, timed(step), ...) end
    end
  end
  for _, name in ipairs { 'forward', 'backward', 'acc', 'forwardPlan', 'backwardPlan' } do wrap(plan, name, 'plan') end
  -- the fused chains: wrap the compiled runners of every clone's plan
  local clones = {}
  for i = 1, 2 do loop(1) end
  local nrun = 0
  local byChain = {}
  local ok, err = pcall(function()
    -- plan.of(gm) for every gModule reachable: walk the loop's upvalues
    local seen = {}
    local function visit(v, depth)
      if depth > 8 or seen[v] then return end
      if type(v) == 'function' then
        seen[v] = true
        local j = 1
        while true do
          local name, u = debug.getupvalue(v, j)
          if not name then break end
          visit(u, depth + 1)
          j = j + 1
        end
        return
      end
      if type(v) ~= 'table' then return end
      seen[v] = true
      if torch.type(v) == 'nn.gModule' then
        local P = plan.of(v)
        if P then
          for _, chain in ipairs(P.fchains or {}) do
            for _, k in ipairs { 'frun', 'brun' } do
              local r = chain[k]
              if r and not wrapped[r] then
                local label = ('chain%d:%s(%d members)'):format(#chain.members, k == 'frun' and 'fwd' or 'bwd', #chain.members)
                local g = function(t)
                  local t0 = now()
                  local res = r(t)
                  add(label, now() - t0)
                  return res
                end
                wrapped[g] = true
                chain[k] = g
                nrun = nrun + 1
              end
            end
          end
        end
        return
      end
      for _, u in pairs(v) do visit(u, depth + 1) end
    end
    visit(loop, 0)
  end)
  if not ok then print('chains not wrapped: ' .. tostring(err)) end
  loop(2)
  stats, order = {}, {}
  local t0 = now()
  loop(steps)
  local total = (now() - t0) / steps
  table.sort(order, function(a, b) return stats[a].t > stats[b].t end)
  print(('step %.2f ms with wrappers (%d chain runners wrapped); per step:'):format(total * 1e3, nrun))
  for _, k in ipairs(order) do
    local s = stats[k]
    print(('  %-44s %6d calls %8.3f ms  %6.2f us/call'):format(k, s.n / steps, s.t / steps * 1e3, s.t / s.n * 1e6))
  end
elseif mode == 'sample' then
  local profile = require 'jit.profile'
  local byFn, byNn, n = {}, {}, 0
  profile.start(os.getenv('LSTM_SAMPLE') or 'fi1', function(th, samples, vmstate)
    n = n + samples
    local leaf = profile.dumpstack(th, 'pl', 1) .. (os.getenv('LSTM_VMSTATE') and (' [' .. vmstate .. ']') or '')
    byFn[leaf] = (byFn[leaf] or 0) + samples
    local stack = profile.dumpstack(th, 'pl;', 12)
    local nnFrame
    for frame in stack:gmatch('[^;]+') do
      if frame:find('lua/nn') then nnFrame = frame; break end
    end
    nnFrame = (nnFrame or '(other)') .. ' [' .. vmstate .. ']'
    byNn[nnFrame] = (byNn[nnFrame] or 0) + samples
  end)
  loop(steps)
  profile.stop()
  local function dump(tbl, title, k)
    local keys = {}
    for key in pairs(tbl) do keys[#keys + 1] = key end
    table.sort(keys, function(a, b) return tbl[a] > tbl[b] end)
    print(('%s (%d samples)'):format(title, n))
    for i = 1, math.min(k, #keys) do print(('  %5.1f%%  %s'):format(100 * tbl[keys[i]] / n, keys[i])) end
  end
  dump(byFn, 'leaf frame', 40)
  dump(byNn, 'innermost lua/nn* frame [N native, I interpreted, C C code, G GC, J JIT compiler]', 40)
elseif mode == 'aborts' then
  local util = require 'jit.util'
  local counts = {}
  local function where(func, pc)
    local info = util.funcinfo(func, pc)
    return (info.source or '?'):gsub('^@', '') .. ':' .. tostring(info.currentline or info.linedefined)
  end
  jit.attach(function(what, tr, func, pc, otr, oex)
    if what == 'abort' then
      local key = ('abort err %s at %s'):format(tostring(otr), where(func, pc))
      counts[key] = (counts[key] or 0) + 1
    elseif what == 'stop' then
      counts['traces compiled'] = (counts['traces compiled'] or 0) + 1
    end
  end, 'trace')
  loop(steps)
  jit.attach(function() end)
  local keys = {}
  for k in pairs(counts) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b) return counts[a] > counts[b] end)
  for _, k in ipairs(keys) do print(('%6d  %s'):format(counts[k], k)) end
elseif mode == 'length' then
  -- ms per time step against the sequence's length: a short sequence's clones stay in the
  -- caches between its forward and backward, a long one's do not (each clone keeps every
  -- module's output and gradInput: about 0.7 MB at batch 32)
  for _, len in ipairs { 1, 2, 4, 8, 16, 50 } do
    local xs = torch.LongTensor(len, batch):random(1, vocab)
    local ys = torch.LongTensor(len, batch):random(1, vocab)
    local l = models.lstmLoop(proto, layers, hidden, xs, ys, 0.01, true)
    local reps = math.max(1, math.floor(200 / len))
    l(3)
    local b = math.huge
    for _ = 1, 5 do
      local t0 = now()
      l(reps)
      b = math.min(b, (now() - t0) / reps)
    end
    print(('length %3d: %7.3f ms a step, %6.1f us per time step'):format(len, b * 1e3, b / len * 1e6))
  end
elseif mode == 'ab' then
  -- session 13's plan changes off (A: every field checked on every call, updateGradInput and
  -- accGradParameters each checking the plan, chains reading every slot's arrays) and on (B),
  -- alternating in one process: two sets of 50 clones, each compiled with its setting
  local chain = require 'torch.backend.cpu.nn_chain'
  local plan = require 'nngraph.plan'
  local newBackward = nn.gModule.backward
  local function setting(old)
    plan.checkAllFields = old
    nn.gModule.backward = old and nn.Module.backward or newBackward
    chain.cachedChecks = not old
  end
  local loops = {}
  for _, old in ipairs { true, false } do
    setting(old)
    loops[old] = models.lstmLoop(proto, layers, hidden, x, y, 0.01, os.getenv('LSTM_EVAL') == nil)
    loops[old](3)
  end
  local times = { [true] = {}, [false] = {} }
  for _ = 1, steps do
    for _, old in ipairs { true, false } do
      setting(old)
      local t0 = now()
      loops[old](3)
      table.insert(times[old], (now() - t0) / 3 * 1e3)
    end
  end
  setting(false)
  for _, old in ipairs { true, false } do
    local t = times[old]
    table.sort(t)
    print(('%s: best %.2f ms, median %.2f ms (%d rounds of 3 steps)'):format(old and 'A (before)' or 'B (after) ',
      t[1], t[math.ceil(#t / 2)], #t))
  end
elseif mode == 'time' then
  print(('best step of %d: %.2f ms'):format(steps, best(steps) * 1e3))
end
