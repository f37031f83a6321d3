-- Peak resident memory of ResNet-18's training steps (bench/real_models.lua's, as
-- bench/real_models.py trains it: no gradient for the input batch), with training plans on or off:
--   luabridge th bench/plans_train_memory.lua [on|off] [batch] [steps] [threads] [breakdown]
-- Run each setting in a process of its own (the peak is the process's): it prints VmHWM (the
-- peak resident set) and VmRSS after each step, and with `breakdown` the bytes of the distinct
-- storages the model's modules hold, by field; with plans on, what the plan holds.
require 'nn'
local models = dofile('bench/real_models.lua')
local mode, batch, steps, threads = arg[1] or 'on', tonumber(arg[2] or 8), tonumber(arg[3] or 4), tonumber(arg[4] or 1)
local breakdown = arg[5]
if mode == 'off' then nn.plans.enabled = false end
torch.setnumthreads(threads)
require('torch.backend.cpu.blas').watchLoad = false

local function status(key)
  for line in io.lines('/proc/self/status') do
    local v = line:match('^' .. key .. ':%s+(%d+)')
    if v then return tonumber(v) / 1024 end
  end
end

-- bytes of the distinct storages reachable from the modules' fields (rawget: nothing materializes)
local function held(model)
  local seen, byField, total = {}, {}, 0
  local function visit(v, field)
    if torch.isTensor(v) then
      local s = v:storage()
      if s and not seen[torch.pointer(s)] then
        seen[torch.pointer(s)] = true
        local bytes = s:size() * s:elementSize()
        byField[field] = (byField[field] or 0) + bytes
        total = total + bytes
      end
    elseif type(v) == 'table' and not torch.typename(v) then
      for _, x in pairs(v) do visit(x, field) end
    end
  end
  for _, m in ipairs(model:listModules()) do
    for k, v in next, m do if k ~= 'modules' then visit(v, k) end end
  end
  return total, byField
end

torch.manualSeed(1)
local model = models.resnet18(1000):float()
local criterion = nn.CrossEntropyCriterion():float()
local x = torch.FloatTensor(batch, 3, 224, 224):normal()
local y = torch.LongTensor(batch):random(1, 1000)
local step = models.trainer(model, criterion, x, y, 0.01)
print(('plans %s, batch %d, %d threads: start RSS %.0f MB'):format(mode, batch, threads, status('VmRSS')))
for k = 1, steps do
  step(1)
  collectgarbage(); collectgarbage()
  print(('step %d: peak %.0f MB, RSS %.0f MB'):format(k, status('VmHWM'), status('VmRSS')))
end
if mode == 'on' and require('nn.util.plan_train').memory then
  local m = require('nn.util.plan_train').memory(model)
  print(('the plan: buffers %.0f MB in %.0f MB of slots; its lazy modules keep %.0f MB'):format(
    m.buffers / 2^20, m.pool / 2^20, m.lazy / 2^20))
end
if breakdown then
  local total, byField = held(model)
  print(('the modules hold %.0f MB'):format(total / 2^20))
  local names = {}
  for k in pairs(byField) do names[#names + 1] = k end
  table.sort(names, function(a, b) return byField[a] > byField[b] end)
  for _, k in ipairs(names) do print(('  %-16s %8.1f MB'):format(k, byField[k] / 2^20)) end
end
