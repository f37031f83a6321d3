-- nn.THNN: torch/nn's table of THNN kernels, which custom layers require and some call directly
-- (input.THNN.Sigmoid_updateOutput(input:cdata(), self.output:cdata())). There is no libTHNN
-- here: each function of the ops below runs the matching nn module on the tensors it is given
-- (cdata or tensors), writing into the output tensors the caller passed, as THNN's C does.
-- THNN.NULL, getState, optionalTensor, bind, kernels and runKernel are as torch/nn's; the
-- per-type tables hang off the Float and Double tensor metatables as .THNN.
require 'nn'
local ffi = require 'ffi'

local THNN = {}
THNN.NULL = ffi.NULL or nil

function THNN.getState() return THNN.NULL end

function THNN.optionalTensor(t) return t and t:cdata() or THNN.NULL end

-- The tensor behind each struct t:cdata() handed out (weak both ways: the struct lives in its
-- tensor's fields).
local owners = setmetatable({}, { __mode = 'kv' })
local tensorCdata = torch.Tensor.cdata
torch._method('cdata', function(t)
  local c = tensorCdata(t)
  owners[c] = t
  return c
end)

local function tensor(x, op)
  if x == nil or x == THNN.NULL then return nil end
  if torch.isTensor(x) then return x end
  local t = owners[x]
  if not t then error(('nn.THNN.%s: a tensor or its cdata() expected, got %s'):format(op, torch.type(x)), 3) end
  return t
end

-- module:updateOutput(input) into output (the tensor THNN writes), optionally in place.
local function forward(module, input, output, inplace)
  module.output = output
  local r = module:updateOutput(input)
  if r ~= output then output:resizeAs(r):copy(r) end
  if inplace then input:copy(output); output:set(input) end
end

local function backward(module, input, gradOutput, gradInput, output)
  module.gradInput = gradInput:resizeAs(input or output)   -- THNN's C resizes it; some modules do not
  if output then module.output = output end
  local r = module:updateGradInput(input or output, gradOutput)
  if r ~= gradInput then gradInput:resizeAs(r):copy(r) end
end

local ops = {}

-- Pointwise layers: name -> (parameters after the tensors -> module). grad: the tensors of
-- <name>_updateGradInput after gradInput (the forward output for those whose gradient uses it).
local pointwise = {
  Abs = { new = function() return nn.Abs() end },
  Square = { new = function() return nn.Square() end },
  Sigmoid = { new = function() return nn.Sigmoid() end, gradOutputArg = true },
  Tanh = { new = function() return nn.Tanh() end, gradOutputArg = true },
  SoftMax = { new = function() return nn.SoftMax() end, gradOutputArg = true },
  LogSoftMax = { new = function() return nn.LogSoftMax() end, gradOutputArg = true },
  Sqrt = { new = function(eps) return nn.Sqrt(eps) end, gradOutputArg = true, gradTakesNoParams = true },
  Threshold = { new = function(th, val, inplace) return nn.Threshold(th, val), inplace end },
  HardTanh = { new = function(lo, hi, inplace) return nn.HardTanh(lo, hi), inplace end },
  LeakyReLU = { new = function(negval, inplace) return nn.LeakyReLU(negval), inplace end },
  ELU = { new = function(alpha, inplace) return nn.ELU(alpha), inplace end, gradOutputArg = true },
  SoftPlus = { new = function(beta, threshold) return nn.SoftPlus(beta, threshold) end, gradOutputArg = true },
}

for name, spec in pairs(pointwise) do
  ops[name .. '_updateOutput'] = function(input, output, ...)
    local module, inplace = spec.new(...)
    forward(module, input, output, inplace)
  end
  ops[name .. '_updateGradInput'] = function(input, gradOutput, gradInput, ...)
    local output
    if spec.gradOutputArg then output = tensor((...), name .. '_updateGradInput') end
    local params = spec.gradOutputArg and { select(2, ...) } or { ... }
    local module = spec.new(unpack(params, 1, spec.gradTakesNoParams and 0 or table.maxn(params)))
    backward(module, input, gradOutput, gradInput, output)
  end
end

-- Criteria: (input, target, output | gradInput, sizeAverage[, ...]) as THNN's.
local function criterion(name, make)
  ops[name .. '_updateOutput'] = function(input, target, output, sizeAverage, ...)
    local c = make(sizeAverage, ...)
    output:resize(1):fill(c:updateOutput(input, target))
  end
  ops[name .. '_updateGradInput'] = function(input, target, gradInput, sizeAverage, ...)
    local c = make(sizeAverage, ...)
    c.gradInput = gradInput:resizeAs(input)
    local r = c:updateGradInput(input, target)
    if r ~= gradInput then gradInput:resizeAs(r):copy(r) end
  end
end

local function averaging(class)
  return function(sizeAverage)
    local c = class()
    c.sizeAverage = sizeAverage
    return c
  end
end
criterion('MSECriterion', averaging(nn.MSECriterion))
criterion('AbsCriterion', averaging(nn.AbsCriterion))
criterion('SmoothL1Criterion', averaging(nn.SmoothL1Criterion))
criterion('DistKLDivCriterion', averaging(nn.DistKLDivCriterion))
-- (..., sizeAverage, weights, total_weight, ignore_index): total_weight is THNN's buffer
criterion('ClassNLLCriterion', function(sizeAverage, weights, totalWeight, ignoreIndex)
  return nn.ClassNLLCriterion(tensor(weights, 'ClassNLLCriterion'), sizeAverage, ignoreIndex)
end)

-- Layers with state between passes: one module per weight (or indices) tensor, kept while it lives.
local modules = setmetatable({}, { __mode = 'k' })
local function cached(key, make)
  local m = modules[key]
  if not m then m = make(); modules[key] = m end
  return m
end

-- weight: nOutputPlane x (nInputPlane * kH * kW), or 4-D. One module per layer, found by its
-- finput buffer (THNN's state between the passes: the three calls of a layer pass the same one),
-- else by its weight; the layer's current weight and bias tensors are set on it at each call
-- (layers re-view their weight between calls, as BinaryNet's BinarySpatialConvolution does).
local function convolution(finput, weight, kW, kH, dW, dH, padW, padH)
  return cached(finput or weight, function()
    local nIn = weight:dim() == 4 and weight:size(2) or weight:size(2) / (kW * kH)
    return nn.SpatialConvolutionMM(nIn, weight:size(1), kW, kH, dW, dH, padW, padH)
  end)
end

function ops.SpatialConvolutionMM_updateOutput(input, output, weight, bias, finput, fgradInput, ...)
  local m = convolution(finput, weight, ...)
  m.weight, m.bias = weight, bias
  forward(m, input, output)
end

function ops.SpatialConvolutionMM_updateGradInput(input, gradOutput, gradInput, weight, finput, fgradInput, ...)
  local m = convolution(finput, weight, ...)
  m.weight = weight
  backward(m, input, gradOutput, gradInput)
end

function ops.SpatialConvolutionMM_accGradParameters(input, gradOutput, gradWeight, gradBias, finput, fgradInput,
                                                    kW, kH, dW, dH, padW, padH, scale)
  local m = convolution(finput, gradWeight,
    kW, kH, dW, dH, padW, padH)
  m.gradWeight, m.gradBias = gradWeight, gradBias
  if not gradBias then m.bias = nil end
  m:accGradParameters(input, gradOutput, scale or 1)
end

local function maxPooling(indices, kW, kH, dW, dH, padW, padH, ceilMode)
  return cached(indices, function()
    local m = nn.SpatialMaxPooling(kW, kH, dW, dH, padW, padH)
    if ceilMode then m:ceil() end
    return m
  end)
end

function ops.SpatialMaxPooling_updateOutput(input, output, indices, ...)
  forward(maxPooling(indices, ...), input, output)
end

function ops.SpatialMaxPooling_updateGradInput(input, gradOutput, gradInput, indices, ...)
  backward(maxPooling(indices, ...), input, gradOutput, gradInput)
end

local function averagePooling(kW, kH, dW, dH, padW, padH, ceilMode, countIncludePad)
  local m = nn.SpatialAveragePooling(kW, kH, dW, dH, padW, padH)
  if ceilMode then m:ceil() end
  if countIncludePad == false then m:setCountExcludePad() end
  return m
end

function ops.SpatialAveragePooling_updateOutput(input, output, ...)
  forward(averagePooling(...), input, output)
end

function ops.SpatialAveragePooling_updateGradInput(input, gradOutput, gradInput, ...)
  backward(averagePooling(...), input, gradOutput, gradInput)
end

-- LookupTable (THNN's generic/LookupTable.c): custom lookup tables copied from nn's call these
-- directly (cheng6076/SNLI-attention's LookupTableEmbedding_train). Indices are 1-based; rows whose
-- index equals paddingValue get no gradient; with scaleGradByFreq each row's gradient is divided by
-- how often its index occurs in input (counted into count).
function ops.LookupTable_accGradParameters(input, gradOutput, gradWeight, count, _sorted, _indices,
                                           scaleGradByFreq, paddingValue, scale)
  local idx = input:contiguous():view(-1):long()
  local n, rows = idx:nElement(), gradWeight:size(1)
  if n > 0 and (idx:min() < 1 or idx:max() > rows) then
    error(('nn.THNN.LookupTable_accGradParameters: input out of range: indices must be in [1, %d], got values in [%d, %d]')
      :format(rows, idx:min(), idx:max()), 3)
  end
  local grad = gradOutput:contiguous():view(n, -1)
  if grad:size(2) ~= gradWeight:size(2) then
    error(('nn.THNN.LookupTable_accGradParameters: gradOutput has %d values per index but gradWeight rows have %d')
      :format(grad:size(2), gradWeight:size(2)), 3)
  end
  scale = scale or 1
  local freq
  if scaleGradByFreq then
    freq = torch.zeros(rows)
    freq:indexAdd(1, idx, torch.ones(n))
    if count then count:resize(rows):copy(freq) end
  end
  for i = 1, n do
    local k = idx[i]
    if k ~= paddingValue then
      local s = scale
      if freq then s = s / freq[k] end
      gradWeight[k]:add(s, grad[i])
    end
  end
end

-- Rows of weight named in idx whose normType-norm exceeds maxNorm are scaled down to maxNorm.
function ops.LookupTable_renorm(idx, weight, maxNorm, normType)
  local seen = {}
  local rows = idx:contiguous():view(-1):long()
  for i = 1, rows:nElement() do
    local k = rows[i]
    if k < 1 or k > weight:size(1) then
      error(('nn.THNN.LookupTable_renorm: input out of range: indices must be in [1, %d], got %d'):format(weight:size(1), k), 3)
    end
    if not seen[k] then
      seen[k] = true
      local row = weight[k]
      local norm = row:norm(normType)
      if norm > maxNorm then row:mul(maxNorm / (norm + 1e-7)) end
    end
  end
end

-- THNN's calling convention: tensors as cdata (or tensors), numbers and booleans as they are.
local function kernel(name, op)
  return function(...)
    local args = { n = select('#', ...), ... }
    for i = 1, args.n do
      local v = args[i]
      if type(v) == 'cdata' and v ~= THNN.NULL then args[i] = tensor(v, name) end
    end
    return op(unpack(args, 1, args.n))
  end
end

-- THNN.C: the library, as THNN_<Type><Op>(state, ...) (Float and Double).
THNN.C = setmetatable({}, { __index = function(_, key)
  local op = type(key) == 'string' and (key:match('^THNN_Float(.+)$') or key:match('^THNN_Double(.+)$'))
  local f = op and ops[op]
  if not f then error(('nn.THNN: no kernel %s in luabridge'):format(tostring(key)), 2) end
  local k = kernel(op, f)
  return function(_state, ...) return k(...) end
end })

-- bind(lib, names, typeName, stateGetter): {name = function(...) lib.THNN_<typeName><name>(state, ...) end}
-- for the names lib has.
function THNN.bind(lib, names, typeName, stateGetter)
  local ftable = {}
  for _, n in ipairs(names) do
    local ok, f = pcall(function() return lib['THNN_' .. typeName .. n] end)
    if ok and f then ftable[n] = function(...) return f(stateGetter(), ...) end end
  end
  return ftable
end

local names = {}
for name in pairs(ops) do names[#names + 1] = name end
table.sort(names)
THNN.names = names

THNN.kernels = {}
for _, typeName in ipairs({ 'Float', 'Double' }) do
  local ftable = THNN.bind(THNN.C, names, typeName, THNN.getState)
  THNN.kernels['torch.' .. typeName .. 'Tensor'] = ftable
  torch.getmetatable('torch.' .. typeName .. 'Tensor').THNN = ftable
end

function THNN.runKernel(name, typeName, ...)
  local ftable = THNN.kernels[typeName]
  if not ftable then error('Unsupported tensor type: ' .. tostring(typeName), 2) end
  local f = ftable[name]
  if not f then error(("Function '%s' not found for tensor type '%s'."):format(tostring(name), typeName), 2) end
  return f(...)
end

return THNN
