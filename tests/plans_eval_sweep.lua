-- A corpus model (tools/real_programs.py's model harness protocol: arg[1] is its spec) at Float in
-- evaluation mode, planned (nn.plans.enabled) against a twin run layer by layer: forwards x, x,
-- x2 (every module's output read), x, x (read again); fails past 1e-4 (relative).
require 'torch'
require 'nn'
local spec = dofile(arg[1])
local function chunk(code, what) return assert(loadstring(code, '=' .. what)) end
torch.manualSeed(1234)
if spec.setup then chunk(spec.setup, 'setup')() end
local model = chunk(spec.build, 'build')()
local input
if type(spec.input) == 'table' then input = torch.Tensor(torch.LongStorage(spec.input)):normal()
else input = chunk('return ' .. spec.input, 'input')() end
local function toFloat(x)
  if torch.isTensor(x) then
    local t = x:type()
    if t == 'torch.DoubleTensor' or t == 'torch.CudaTensor' then return x:float() end
    return x
  elseif type(x) == 'table' then local y = {} for k, v in pairs(x) do y[k] = toFloat(v) end return y end
  return x
end
local seqs = 0
for _, m in ipairs(model:listModules()) do if torch.type(m) == 'nn.Sequential' then seqs = seqs + 1 end end
local okf = pcall(function() model = model:float() end)
if seqs == 0 or not okf then print('sweep: skip (no Sequential or no :float())'); print('corpus-model: output -'); print('corpus-model: ok'); return end
input = toFloat(input)
model:evaluate()
local twin = model:clone()
local planConv = require 'nn.util.plan_conv'
local function maxDiff(a, b)
  if type(a) == 'table' and not torch.isTensor(a) then
    if type(b) ~= 'table' or torch.isTensor(b) then return math.huge end
    local d = 0
    for k, v in pairs(a) do d = math.max(d, maxDiff(v, b[k])) end
    for k, v in pairs(b) do if a[k] == nil then return math.huge end end
    return d
  end
  if not torch.isTensor(a) or not torch.isTensor(b) then return (a == b or (a == nil and b == nil)) and 0 or (type(a) == type(b) and type(a) ~= 'table' and 0) or math.huge end
  if a:nElement() == 0 and b:nElement() == 0 then return 0 end
  if not a:isSameSizeAs(b) then return math.huge end
  if a:type() ~= b:type() then return math.huge end
  if a:type() ~= 'torch.FloatTensor' and a:type() ~= 'torch.DoubleTensor' then return a:double():add(-1, b:double()):abs():max() end
  local scale = math.max(1, b:double():abs():max())
  return a:double():add(-1, b:double()):abs():max() / scale
end
local function randomLike(x)
  if torch.isTensor(x) then
    if x:type() == 'torch.FloatTensor' or x:type() == 'torch.DoubleTensor' then return x.new():resizeAs(x):normal() end
    return x:clone()
  elseif type(x) == 'table' then local y = {} for k, v in pairs(x) do y[k] = randomLike(v) end return y end
  return x
end
local x2 = randomLike(input)
local worst, where, planned = 0, '', 0
local function both(inp, tag, all)
  torch.manualSeed(99); nn.plans.enabled = false
  local okr, ref = pcall(twin.forward, twin, inp)
  torch.manualSeed(99); nn.plans.enabled = true
  local okm, out = pcall(model.forward, model, inp)
  if okr ~= okm then worst, where = math.huge, tag .. ': error only one way: ' .. tostring(okr and out or ref) return end
  if not okr then print('sweep: both fail at ' .. tag .. ': ' .. tostring(ref)); return end
  for _, m in ipairs(model:listModules()) do if planConv.planned(m) then planned = planned + 1 end end
  local d = maxDiff(out, ref)
  if d > worst then worst, where = d, tag .. ' output' end
  if all then
    local a, b = model:listModules(), twin:listModules()
    for i = 1, #b do
      local d = maxDiff(a[i].output, b[i].output)
      if d > worst then worst, where = d, tag .. ' module ' .. i .. ' ' .. torch.type(b[i]) end
    end
  end
end
both(input, 'f1'); both(input, 'f2'); both(x2, 'f3', true); both(input, 'f4'); both(input, 'f5', true)
print(('sweep: planned %d worst %g at %s'):format(planned, worst, where))
print('corpus-model: output planned=' .. planned .. ' worst=' .. string.format('%.2g', worst))
if worst > 1e-4 then error('sweep: planned differs from layer by layer by ' .. worst .. ' at ' .. where, 0) end
print('corpus-model: ok')
