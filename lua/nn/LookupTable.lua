-- Embeddings: row input[i] of weight (nIndex x nOutput) for each index of a vector (or a
-- matrix: batch x indices). Rows looked up are renormalized to at most maxNorm (in the
-- normType norm) first when maxNorm is set; the paddingValue index gets no gradient.
local check = require 'torch.core.check'
local LookupTable, parent = torch.class('nn.LookupTable', 'nn.Module')

LookupTable.__version = 4

function LookupTable:__init(nIndex, nOutput, paddingValue, maxNorm, normType)
  parent.__init(self)
  check.int('nn.LookupTable', nIndex, 'nIndex', 0)
  check.int('nn.LookupTable', nOutput, 'nOutput', 0)
  self.weight = torch.Tensor(nIndex, nOutput)
  self.gradWeight = torch.Tensor(nIndex, nOutput):zero()
  self:setPadding(paddingValue or 0)
  self:setMaxNorm(maxNorm)
  self:setNormType(normType)
  self.shouldScaleGradByFreq = false
  self._input = torch.LongTensor()
  self:reset()
end

function LookupTable:accUpdateOnly() self.gradWeight = nil; return self end
function LookupTable:setPadding(v) self.paddingValue = check.number('nn.LookupTable', v, 'paddingValue'); return self end
function LookupTable:setMaxNorm(v) self.maxNorm = check.optNumber('nn.LookupTable', v, 'maxNorm'); return self end
function LookupTable:setNormType(v) self.normType = check.optNumber('nn.LookupTable', v, 'normType'); return self end
function LookupTable:scaleGradByFreq() self.shouldScaleGradByFreq = true; return self end

function LookupTable:reset(stdv)
  self.weight:normal(0, stdv or 1)
end

-- The indices as a contiguous 1D LongTensor, checked against the table size.
function LookupTable:indices(input)
  if not torch.isTensor(input) or (input:dim() ~= 1 and input:dim() ~= 2) then
    check.error(('nn.LookupTable: input must be a vector or matrix of indices, got %s'):format(
      torch.isTensor(input) and check.sizestr(input) or torch.type(input)))
  end
  self._input = self._input or torch.LongTensor()
  local idx = self._input:resize(input:size()):copy(input):view(-1)
  local n = self.weight:size(1)
  if idx:nElement() > 0 and (idx:min() < 1 or idx:max() > n) then
    check.error(('nn.LookupTable: indices must be in [1, %d], got values in [%d, %d]'):format(
      n, idx:min(), idx:max()))
  end
  return idx
end

-- Scales each distinct looked-up row whose norm exceeds maxNorm down to maxNorm.
function LookupTable:renorm(idx)
  local p = self.normType or 2
  local seen = {}
  for i = 1, idx:nElement() do
    local k = tonumber(idx[i])
    if not seen[k] then
      seen[k] = true
      local row = self.weight[k]
      local norm = row:norm(p)
      if norm > self.maxNorm then row:mul(self.maxNorm / (norm + 1e-7)) end
    end
  end
end

function LookupTable:updateOutput(input)
  local idx = self:indices(input)
  if self.maxNorm then self:renorm(idx) end
  self.output:index(self.weight, 1, idx)
  if input:dim() == 2 then
    self.output = self.output:view(input:size(1), input:size(2), self.weight:size(2))
  end
  return self.output
end

-- Indices get no gradient: gradInput is zeros of the input's size.
function LookupTable:updateGradInput(input, gradOutput)
  if torch.type(self.gradInput) ~= torch.type(input) then self.gradInput = input.new() end
  if not self.gradInput:isSameSizeAs(input) then self.gradInput:resizeAs(input):zero() end
  return self.gradInput
end

-- Row scales: 0 for the padding index, 1/count with scaleGradByFreq, else nil (all 1).
function LookupTable:rowScales(idx, gradOutput)
  local pad = self.paddingValue
  local hasPad = pad >= 1 and pad <= self.weight:size(1) and idx:eq(pad):sum() > 0
  if not hasPad and not self.shouldScaleGradByFreq then return nil end
  self._scales = self._scales or gradOutput.new()
  local scales = self._scales:resize(idx:nElement()):fill(1)
  if self.shouldScaleGradByFreq then
    local count = {}
    for i = 1, idx:nElement() do
      local k = tonumber(idx[i]); count[k] = (count[k] or 0) + 1
    end
    for i = 1, idx:nElement() do scales[i] = 1 / count[tonumber(idx[i])] end
  end
  if hasPad then
    for i = 1, idx:nElement() do if tonumber(idx[i]) == pad then scales[i] = 0 end end
  end
  return scales
end

function LookupTable:accGradParameters(input, gradOutput, scale)
  local idx = self:indices(input)
  local n, d = idx:nElement(), self.weight:size(2)
  if gradOutput:nElement() ~= n * d then
    check.error(('nn.LookupTable: gradOutput size %s does not match %d indices x %d'):format(
      check.sizestr(gradOutput), n, d))
  end
  local g = gradOutput:contiguous():view(n, d)
  local scales = self:rowScales(idx, gradOutput)
  if scales then
    self._grad = self._grad or gradOutput.new()
    g = self._grad:resizeAs(g):cmul(g, scales:view(n, 1):expandAs(g))
  end
  if (scale or 1) ~= 1 then
    self._grad = self._grad or gradOutput.new()
    g = self._grad:resizeAs(g):mul(g, scale)
  end
  self.gradWeight:indexAdd(1, idx, g)
end

function LookupTable:sharedAccUpdateGradParameters(input, gradOutput, lr)
  self:defaultAccUpdateGradParameters(input, gradOutput, lr)
end

-- The index buffer stays a LongTensor whatever the module's type.
function LookupTable:type(type, cache)
  parent.type(self, type, cache)
  self._input = torch.LongTensor()
  return self
end

function LookupTable:clearState()
  return parent.clearState(self, '_input', '_scales', '_grad')
end
