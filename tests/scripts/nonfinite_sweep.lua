-- Runs nn modules and index-producing ops on inputs holding NaN, infinities and huge values,
-- forward and backward, under pcall: a clean Lua error is fine, a crash is not. Kernels that
-- compute indices from data (pooling, criterions, lookups) must keep them inside their buffers.
-- Run by tests/test_nn_nonfinite.py with the JIT on and off (their NaN rules for math.max/min differ).
require 'nn'
if os.getenv('LUABRIDGE_JIT_OFF') then jit.off() end
torch.manualSeed(7)
math.randomseed(7)
local odd = { 0 / 0, math.huge, -math.huge, 1e300, -1e300, 2 ^ 63, -5, 0, 1.5, 11 }

local function spoil(t)
  local flat = t:view(t:nElement())
  for _ = 1, math.random(1, flat:nElement()) do flat[math.random(flat:nElement())] = odd[math.random(3)] end
  return t
end

local function module(make, shape)
  return function()
    local m, x = make(), spoil(torch.randn(table.unpack(shape)))
    local y = m:forward(x)
    m:backward(x, y:clone():fill(1))
  end
end

local function target(make, inputShape, targetShape)
  return function(bad)
    local c, x, t = make(), torch.randn(table.unpack(inputShape)), torch.Tensor(table.unpack(targetShape)):fill(2)
    t:view(t:nElement())[1] = bad
    c:forward(x, t)
    c:backward(x, t)
  end
end

-- the indices of a reduction over 6 columns must name a column
local function indices(op)
  return function()
    local x = spoil(torch.randn(5, 6))
    local _, i = op(x)
    if i:min() < 1 or i:max() > 6 then error('INDEX OUT OF RANGE ' .. i:min() .. '..' .. i:max()) end
  end
end

-- modules and reductions get spoiled inputs only: they must run (NaN and infinities are values,
-- as in torch7); criterions and lookups get bad targets or indices: a clean error is fine there
local mustRun = {
  module(function() return nn.SpatialMaxPooling(2, 2, 2, 2) end, { 2, 3, 8, 8 }),
  module(function() return nn.SpatialMaxPooling(3, 3, 2, 2) end, { 2, 3, 8, 8 }),
  module(function() return nn.SpatialMaxPooling(3, 3, 2, 2, 1, 1):ceil() end, { 2, 3, 8, 8 }),
  module(function() return nn.SpatialDilatedMaxPooling(2, 2, 1, 1, 0, 0, 2, 2) end, { 2, 3, 8, 8 }),
  module(function() return nn.SpatialAdaptiveMaxPooling(3, 3) end, { 2, 3, 8, 8 }),
  module(function() return nn.SpatialFractionalMaxPooling(2, 2, 0.5, 0.5) end, { 2, 3, 8, 8 }),
  module(function() return nn.VolumetricMaxPooling(1, 2, 2) end, { 2, 3, 2, 8, 8 }),
  module(function() return nn.TemporalMaxPooling(2) end, { 2, 8, 3 }),
  module(function() return nn.SpatialAveragePooling(2, 2, 2, 2) end, { 2, 3, 8, 8 }),
  module(function() return nn.SpatialConvolution(3, 4, 3, 3, 1, 1, 1, 1) end, { 2, 3, 8, 8 }),
  module(function() return nn.Max(2) end, { 4, 5 }),
  module(function() return nn.LogSoftMax() end, { 4, 5 }),
  indices(function(x) return x:max(2) end), indices(function(x) return x:min(2) end),
  indices(function(x) return x:sort(2) end), indices(function(x) return x:topk(3, 2) end),
  indices(function(x) return x:kthvalue(2, 2) end), indices(function(x) return x:median(2) end),
  indices(function(x) return x:mode(2) end),
}
local mayRefuse = {
  target(function() return nn.ClassNLLCriterion() end, { 4, 10 }, { 4 }),
  target(function() return nn.CrossEntropyCriterion() end, { 4, 10 }, { 4 }),
  target(function() return nn.SpatialClassNLLCriterion() end, { 2, 10, 3, 3 }, { 2, 3, 3 }),
  target(function() return nn.MultiMarginCriterion() end, { 4, 10 }, { 4 }),
  function(bad)
    local m, t = nn.LookupTable(10, 3), torch.Tensor(4):fill(2)
    t[2] = bad
    m:forward(t)
    m:backward(t, torch.randn(4, 3))
  end,
}
local failed = {}
for _ = 1, 3 do
  for c, case in ipairs(mustRun) do
    for _, bad in ipairs(odd) do
      local ok, e = pcall(case, bad)
      if not ok then failed[#failed + 1] = c .. ': ' .. tostring(e) end
    end
  end
  for _, case in ipairs(mayRefuse) do
    for _, bad in ipairs(odd) do pcall(case, bad) end
  end
end
print(#failed == 0 and 'all ran' or table.concat(failed, '\n'))
