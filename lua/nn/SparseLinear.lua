-- y = W x + b for sparse x. An input sample is an nnz x 2 tensor of (index, value) rows; a batch is
-- a table of such samples, or (legacy form) a batch x nnz x 2 tensor. gradInput (when doGradInput)
-- is dense, laid out in the same (index, value) form over every input index.
local check = require 'torch.core.check'
local backend = require 'torch.backend'   -- sparse_add_product, sparse_add_outer (nn_sparse)
local SparseLinear, parent = torch.class('nn.SparseLinear', 'nn.Module')

-- How many gradients were accumulated since the last zeroing: with exactly one, updates and
-- zeroing only touch the weight columns of that input.
local NO_LAST_INPUT, ONE_LAST_INPUT, ACC_MULTIPLE_TIMES = 0, 1, 2

function SparseLinear:__init(inputSize, outputSize, doGradInput)
  parent.__init(self)
  self.weightDecay = 0
  check.int('nn.SparseLinear', inputSize, 'inputSize', 0)
  check.int('nn.SparseLinear', outputSize, 'outputSize', 0)
  self.doGradInput = check.optBoolean('nn.SparseLinear', doGradInput, 'doGradInput') or false
  self.weight = torch.Tensor(outputSize, inputSize):zero()
  self.bias = torch.Tensor(outputSize):zero()
  self.gradWeight = torch.Tensor(outputSize, inputSize):zero()
  self.gradBias = torch.Tensor(outputSize):zero()
  self.sparseUpdate = NO_LAST_INPUT
  self.gradInput = {}
  self.output:resize(outputSize)
  self:reset()
end

function SparseLinear:reset(stdv)
  stdv = stdv and stdv * math.sqrt(3) or 1 / math.sqrt(self.weight:size(2))
  self.weight:uniform(-stdv, stdv)
  self.bias:uniform(-stdv, stdv):mul(0.000001)
  return self
end

local function sample(t, what)
  if not torch.isTensor(t) or t:dim() ~= 2 or t:size(2) ~= 2 then
    check.error(('nn.SparseLinear: %s must be an nnz x 2 tensor of (index, value) rows, got %s'):format(
      what, torch.isTensor(t) and check.sizestr(t) or torch.type(t)))
  end
  return t
end

-- Flattens any input form into self._coo, an nnz x 3 list of (sample, index, value) rows.
-- Returns the number of samples, whether the output keeps a batch dimension, and the legacy flag.
function SparseLinear:_coords(input)
  local samples, batchMode, legacy
  if torch.type(input) == 'table' then
    samples, batchMode, legacy = input, true, false
    for i, t in ipairs(samples) do sample(t, 'input[' .. i .. ']') end
  elseif torch.isTensor(input) and input:dim() == 3 and input:size(3) == 2 then
    samples, batchMode, legacy = {}, true, true
    for i = 1, input:size(1) do samples[i] = input[i] end
  else
    samples, batchMode, legacy = { sample(input, 'input') }, false, false
  end
  local nnz = 0
  for i, t in ipairs(samples) do
    if t:type() ~= self.weight:type() then
      check.error(('nn.SparseLinear: input[%d] is a %s but the weight is a %s'):format(
        i, torch.typename(t), torch.typename(self.weight)))
    end
    nnz = nnz + t:size(1)
  end
  self._coo = self._coo or self.weight.new()
  self._coo:resize(nnz, 3)
  local at = 1
  for i, t in ipairs(samples) do
    local n = t:size(1)
    if n > 0 then
      local part = self._coo:narrow(1, at, n)
      part:select(2, 1):fill(i)
      part:narrow(2, 2, 2):copy(t)
    end
    at = at + n
  end
  local inDim, cols = self.weight:size(2), self._coo:select(2, 2)
  -- NaN-proof (min and max give NaN when any index is NaN): an index becomes an address
  if nnz > 0 and not (cols:min() >= 1 and cols:max() <= inDim) then
    check.error(('nn.SparseLinear: index out of bound, indices must lie in [1, %d], got [%s, %s]'):format(
      inDim, cols:min(), cols:max()))
  end
  return #samples, batchMode, legacy
end

function SparseLinear:updateOutput(input)
  if self.sparseUpdate == ONE_LAST_INPUT then self.sparseUpdate = ACC_MULTIPLE_TIMES end
  local nb, batchMode, legacy = self:_coords(input)
  self.legacyMode = legacy
  local outDim = self.weight:size(1)
  if nb == 0 then  -- an empty batch gives the bias, as torch7
    self.output:resize(outDim):copy(self.bias)
    return self.output
  end
  self.output:resize(nb, outDim):copy(self.bias:view(1, outDim):expand(nb, outDim))
  backend.of(self.output).sparse_add_product(self._coo, self.weight, self.output)
  if not batchMode then self.output = self.output:view(outDim) end
  return self.output
end

local function checkGradOutput(self, nb, batchMode, gradOutput)
  local outDim = self.weight:size(1)
  local ok = torch.isTensor(gradOutput) and gradOutput:size(gradOutput:dim()) == outDim
    and (batchMode and gradOutput:dim() == 2 and gradOutput:size(1) == nb or
         not batchMode and gradOutput:dim() == 1)
  if not ok then
    check.error(('nn.SparseLinear: gradOutput size %s does not match output size %s'):format(
      torch.isTensor(gradOutput) and check.sizestr(gradOutput) or torch.type(gradOutput),
      batchMode and nb .. 'x' .. outDim or tostring(outDim)))
  end
  return batchMode and gradOutput or gradOutput:view(1, outDim)
end

-- The distinct input indices of this input (self.lastCols), for the sparse update and zeroing.
function SparseLinear:_rememberColumns()
  self._mask = self._mask or torch.ByteTensor()
  self._mask:resize(self.weight:size(2)):zero()
  self.lastCols = self.lastCols or torch.LongTensor()
  if self._coo:size(1) == 0 then self.lastCols:resize(0) return end
  self._colIndex = self._colIndex or torch.LongTensor()
  self._colIndex:resize(self._coo:size(1)):copy(self._coo:select(2, 2))
  self._mask:indexFill(1, self._colIndex, 1)
  self.lastCols:nonzero(self._mask)
  self.lastCols = self.lastCols:view(-1)
end

function SparseLinear:accGradParameters(input, gradOutput, scale)
  scale = scale or 1
  local nb, batchMode = self:_coords(input)
  local go = checkGradOutput(self, nb, batchMode, gradOutput)
  if self.sparseUpdate == NO_LAST_INPUT then
    self:_rememberColumns()
    self.sparseUpdate = ONE_LAST_INPUT
  elseif self.sparseUpdate == ONE_LAST_INPUT then
    self.sparseUpdate = ACC_MULTIPLE_TIMES
  end
  backend.of(self.gradWeight).sparse_add_outer(self._coo, go, self.gradWeight, scale)
  self.gradBias:add(scale, go:sum(1):view(self.weight:size(1)))
  if (self.weightDecay or 0) ~= 0 then self.gradWeight:add(self.weightDecay, self.weight) end
end

function SparseLinear:updateGradInput(input, gradOutput)
  local nb, batchMode, legacy = self:_coords(input)
  local go = checkGradOutput(self, nb, batchMode, gradOutput)
  self.legacyMode = legacy
  if legacy then
    if not torch.isTensor(self.gradInput) then self.gradInput = gradOutput.new() end
    self.gradInput:resizeAs(input)
  else
    self.gradInput = {}
  end
  if not self.doGradInput then return self.gradInput end
  local inDim = self.weight:size(2)
  local dense = go * self.weight  -- nb x inDim
  if legacy then
    self.gradInput:resize(nb, inDim, 2)
    self.gradInput:select(3, 1):copy(torch.range(1, inDim):view(1, inDim):expand(nb, inDim))
    self.gradInput:select(3, 2):copy(dense)
  else
    for i = 1, nb do
      local gi = gradOutput.new(inDim, 2)
      gi:select(2, 1):range(1, inDim)
      gi:select(2, 2):copy(dense[i])
      self.gradInput[i] = gi
    end
  end
  return self.gradInput
end

-- After one accumulation only the columns of that input can hold gradient.
local function sparseStep(self)
  return self.lastCols and self.sparseUpdate == ONE_LAST_INPUT
end

function SparseLinear:updateParameters(learningRate)
  if sparseStep(self) then
    local cols = self.lastCols
    if cols:nElement() > 0 then
      local w = self.weight:index(2, cols):add(-learningRate, self.gradWeight:index(2, cols))
      self.weight:indexCopy(2, cols, w)
    end
    self.bias:add(-learningRate, self.gradBias)
  else
    parent.updateParameters(self, learningRate)
  end
end

function SparseLinear:zeroGradParameters()
  if sparseStep(self) then
    if self.lastCols:nElement() > 0 then self.gradWeight:indexFill(2, self.lastCols, 0) end
    self.gradBias:zero()
  else
    parent.zeroGradParameters(self)
  end
  self.sparseUpdate = NO_LAST_INPUT
end

function SparseLinear:clearState()
  for _, name in ipairs({ 'lastCols', '_coo', '_mask', '_colIndex' }) do
    if self[name] then self[name]:set() end
  end
  self.sparseUpdate = NO_LAST_INPUT
  return parent.clearState(self)
end

function SparseLinear:__tostring__()
  return ('%s(%d -> %d)'):format(torch.type(self), self.weight:size(2), self.weight:size(1))
end
