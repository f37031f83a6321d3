-- A Linear layer over sparse inputs given as (keys, values): weight is inputSize x outputSize
-- (one row per key), y = bias + sum_j values_j * weight[keys_j + keysOffset] (keysOffset
-- defaults to 0: 1-based keys). Inputs:
--   {keys, values}                 one sample (1-D LongTensor keys, 1-D values)
--   {{keys...}, {values...}}       a batch as tables of such vectors
--   {keys, values, sizes}          a batch flattened, sizes[i] entries per sample
-- Gradients of the weight stay sparse: each accGradParameters records its input and gradOutput,
-- and updateParameters applies them (with sparse weight decay) to the touched rows only.
-- torch7's max-normalize mode (normalize = true) is not supported.
local check = require 'torch.core.check'
local backend = require 'torch.backend'   -- sparse_add_product, sparse_add_outer (nn_sparse)
local IndexLinear, parent = torch.class('nn.IndexLinear', 'nn.Module')

function IndexLinear:__init(inputSize, outputSize, doGradInput, keysOffset, weight, bias, normalize)
  parent.__init(self)
  if normalize then check.error('nn.IndexLinear: the max-normalize mode is not supported') end
  self.normalize = 0
  if weight == nil then
    check.int('nn.IndexLinear', inputSize, 'inputSize', 0)
    check.int('nn.IndexLinear', outputSize, 'outputSize', 0)
  end
  self.weight = check.optTensorOf('nn.IndexLinear', weight, 'weight') or torch.Tensor(inputSize, outputSize):zero()
  if self.weight:dim() ~= 2 then
    check.error('nn.IndexLinear: weight must be a matrix, got ' .. check.sizestr(self.weight))
  end
  self.bias = check.optTensorOf('nn.IndexLinear', bias, 'bias') or torch.Tensor(self.weight:size(2)):zero()
  self.inputSize, self.outputSize = self.weight:size(1), self.weight:size(2)
  self.gradWeight = torch.Tensor()
  self.gradBias = torch.Tensor(self.outputSize):zero()
  self.running = { counter = 1, steps = {} }
  self.weightDecay = 0
  self.doGradInput = doGradInput or false
  self.offset = (check.optInt('nn.IndexLinear', keysOffset, 'keysOffset') or 0) - 1
end

function IndexLinear:reset(stdv)
  stdv = stdv and stdv * math.sqrt(3) or 1 / math.sqrt(self.weight:size(2))
  self.weight:uniform(-stdv, stdv)
  self.bias:uniform(-stdv, stdv):mul(0.000001)
  return self
end

local function fail(fmt, ...) check.error('nn.IndexLinear: ' .. fmt:format(...)) end

-- The input as lists of per-sample key and value vectors, and whether it has no batch dimension.
local function samples(input)
  if torch.type(input) ~= 'table' or (#input ~= 2 and #input ~= 3) then
    fail('expected {keys, values} or {keys, values, sizes}, got %s', torch.type(input))
  end
  local keys, values = input[1], input[2]
  if #input == 3 then
    if not (torch.isTensor(keys) and torch.isTensor(values)) or keys:dim() ~= 1
        or keys:nElement() ~= values:nElement() then
      fail('flat keys and values must be 1-D tensors of the same size')
    end
    local sizes = torch.isTensor(input[3]) and input[3]:totable() or { input[3] }
    local lk, lv, at = {}, {}, 1
    for i, n in ipairs(sizes) do
      if n < 0 or at + n - 1 > keys:nElement() then fail('sizes do not add up to %d keys', keys:nElement()) end
      lk[i], lv[i] = keys:narrow(1, at, n), values:narrow(1, at, n)
      at = at + n
    end
    return lk, lv, false, true
  end
  if torch.isTensor(keys) and torch.isTensor(values) then return { keys }, { values }, true, false end
  if torch.type(keys) == 'table' and torch.type(values) == 'table' and #keys == #values then
    return keys, values, false, false
  end
  fail('keys and values must be two tensors or two tables of tensors of the same length')
end

-- Builds self._coo (sample, row, value) from the input; returns batch size, noBatch, flat.
function IndexLinear:_coords(input)
  local lk, lv, noBatch, flat = samples(input)
  local nnz = 0
  for i, k in ipairs(lk) do
    if not (torch.isTensor(k) and torch.isTensor(lv[i])) or k:dim() ~= 1 or lv[i]:dim() ~= 1
        or k:nElement() ~= lv[i]:nElement() then
      fail('keys and values of sample %d must be 1-D tensors of the same size', i)
    end
    nnz = nnz + k:nElement()
  end
  self._coo = self._coo or self.weight.new()
  self._coo:resize(nnz, 3)
  local at = 1
  for i, k in ipairs(lk) do
    local n = k:nElement()
    if n > 0 then
      local part = self._coo:narrow(1, at, n)
      part:select(2, 1):fill(i)
      part:select(2, 2):copy(k):add(self.offset + 1)
      part:select(2, 3):copy(lv[i])
    end
    at = at + n
  end
  local rows = self._coo:select(2, 2)
  -- NaN-proof (min and max give NaN when any key is NaN): a key becomes an address
  if nnz > 0 and not (rows:min() >= 1 and rows:max() <= self.inputSize) then
    fail('keys out of range: rows %s..%s with offset %d, weight has %d rows', rows:min(), rows:max(),
      self.offset + 1, self.inputSize)
  end
  return #lk, noBatch, flat
end

function IndexLinear:updateOutput(input)
  local nb, noBatch = self:_coords(input)
  self.noBatch = noBatch
  local outDim = self.outputSize
  self.output:resize(nb, outDim):copy(self.bias:view(1, outDim):expand(nb, outDim))
  backend.of(self.output).sparse_add_product(self._coo, self.weight:t(), self.output)
  if noBatch then self.output = self.output:view(outDim) end
  return self.output
end

local function batchGrad(self, nb, gradOutput)
  local outDim = self.outputSize
  if not torch.isTensor(gradOutput) or gradOutput:nElement() ~= nb * outDim
      or gradOutput:size(gradOutput:dim()) ~= outDim then
    fail('gradOutput size %s does not match output size %dx%d',
      torch.isTensor(gradOutput) and check.sizestr(gradOutput) or torch.type(gradOutput), nb, outDim)
  end
  return gradOutput:contiguous():view(nb, outDim)
end

-- Records this input's weight gradient (applied by updateParameters) and accumulates gradBias.
function IndexLinear:accGradParameters(input, gradOutput, scale)
  scale = scale or 1
  local nb = self:_coords(input)
  local go = batchGrad(self, nb, gradOutput)
  self.running.steps[self.running.counter] = { coo = self._coo:clone(), grad = go:clone(), scale = scale }
  self.running.counter = self.running.counter + 1
  self.gradBias:add(scale, go:sum(1):view(self.outputSize))
end

-- Updates weight rows and bias in place by -lr times this input's gradients.
function IndexLinear:accUpdateGradParameters(input, gradOutput, lr)
  local nb = self:_coords(input)
  local go = batchGrad(self, nb, gradOutput)
  backend.of(self.weight).sparse_add_outer(self._coo, go, self.weight:t(), -(lr or 1))
  self.bias:add(-(lr or 1), go:sum(1):view(self.outputSize))
end

function IndexLinear:updateGradInput(input, gradOutput)
  local nb, noBatch, flat = self:_coords(input)
  local go = batchGrad(self, nb, gradOutput)
  self.gradInput = {}
  if not self.doGradInput then return self.gradInput end
  local ini = self.inputSize
  local dense = go * self.weight:t()  -- nb x inputSize
  local indices = torch.range(1, ini):long()
  if flat then
    self.gradInput = { indices:view(1, ini):expand(nb, ini):clone(), dense }
  else
    local keys, values = {}, {}
    for i = 1, nb do keys[i], values[i] = indices:clone(), dense[i]:clone() end
    self.gradInput = { keys, values }
  end
  if noBatch then self.gradInput = { self.gradInput[1][1], self.gradInput[2][1] } end
  return self.gradInput
end

-- Applies the recorded gradients: every touched row first decays by weightDecay once per
-- occurrence of its key, then moves by -lr times its gradient; the bias by -lr * gradBias.
function IndexLinear:updateParameters(lr)
  if not lr then fail('updateParameters needs a learning rate') end
  self.bias:add(-lr, self.gradBias)
  for i = 1, self.running.counter - 1 do
    local step = self.running.steps[i]
    if (self.weightDecay or 0) ~= 0 and step.coo:size(1) > 0 then
      local rows = step.coo:select(2, 2):long()
      local counts = self.weight.new(self.inputSize):zero():indexAdd(1, rows, self.weight.new(rows:size(1)):fill(1))
      local factor = counts:mul(math.log(1 - self.weightDecay)):exp()  -- (1 - decay)^count
      self.weight:cmul(factor:view(self.inputSize, 1):expandAs(self.weight))
    end
    backend.of(self.weight).sparse_add_outer(step.coo, step.grad, self.weight:t(), -lr * step.scale)
  end
end

function IndexLinear:zeroGradParameters()
  self.gradBias:zero()
  self.running.counter, self.running.steps = 1, {}
end

function IndexLinear:parameters()
  return { self.weight, self.bias }, { self.running, self.gradBias }
end

function IndexLinear:clearState()
  self.running.counter, self.running.steps = 1, {}
  if self._coo then self._coo:set() end
  return parent.clearState(self)
end
