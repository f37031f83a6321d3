-- nn.TrimZero(module, nInputDim[, silent]): like MaskZero, but the all-zero samples of a batch are
-- removed before module runs (less work) and come back as zero rows.
local TrimZero, parent = torch.class('nn.TrimZero', 'nn.MaskZero')

function TrimZero:__init(module, nInputDim, silent)
  parent.__init(self, module, nInputDim, silent)
  local kind = torch.typename(module)
  if (kind == 'nn.GRU' or kind == 'nn.LSTM' or kind == 'nn.FastLSTM') and module.p ~= 0 then
    assert(module.mono, 'TrimZero + Bayesian RNN needs `mono` option!')
  end
  self.temp = torch.Tensor()
  self.gradTemp = torch.Tensor()
end

-- The indices of the samples that are not all zeros (batch mode), in self._maskindices.
function TrimZero:_keptIndices()
  local kept = self.zeroMask:view(-1):eq(0):nonzero()
  self._maskindices = self._maskindices or torch.LongTensor()
  if kept:nElement() > 0 then
    self._maskindices:resize(kept:size(1)):copy(kept:select(2, 1))
  else
    self._maskindices:resize(0)
  end
  return self._maskindices
end

-- output = the kept samples of input; without a batch, zeros when the sample is all zeros.
function TrimZero:recursiveMask(output, input)
  if torch.type(input) == 'table' then
    output = torch.type(output) == 'table' and output or {}
    for k, v in ipairs(input) do output[k] = self:recursiveMask(output[k], v) end
    return output
  end
  output = torch.isTensor(output) and output or input.new()
  if self.batchmode then
    local kept = self._maskindices
    if kept:nElement() > 0 then
      output:index(input, 1, kept)
    else
      output:index(input, 1, torch.LongTensor({ 1 })):zero() -- keep one zero row
    end
  elseif self.zeroMask:view(-1)[1] == 1 then
    output:resize(input:size()):zero()
  else
    output:resize(input:size()):copy(input)
  end
  return output
end

-- output = input's rows scattered back to the full batch, zeros elsewhere.
function TrimZero:recursiveUnMask(output, input)
  if torch.type(input) == 'table' then
    output = torch.type(output) == 'table' and output or {}
    for k, v in ipairs(input) do output[k] = self:recursiveUnMask(output[k], v) end
    return output
  end
  output = torch.isTensor(output) and output or input.new()
  local size = input:size()
  if self.batchmode then size[1] = self.zeroMask:nElement() end
  output:resize(size):zero()
  if self.batchmode then
    if self._maskindices:nElement() > 0 then output:indexCopy(1, self._maskindices, input) end
  elseif self.zeroMask:view(-1)[1] == 0 then
    output:copy(input)
  end
  return output
end

function TrimZero:updateOutput(input)
  self:_computeZeroMask(input)
  if self.batchmode then self:_keptIndices() end
  self.temp = self:recursiveMask(self.temp, input)
  self.output = self:recursiveUnMask(self.output, self.modules[1]:updateOutput(self.temp))
  return self.output
end

function TrimZero:updateGradInput(input, gradOutput)
  self.temp = self:recursiveMask(self.temp, input)
  self.gradTemp = self:recursiveMask(self.gradTemp, gradOutput)
  self.gradInput = self:recursiveUnMask(self.gradInput, self.modules[1]:updateGradInput(self.temp, self.gradTemp))
  return self.gradInput
end

function TrimZero:accGradParameters(input, gradOutput, scale)
  self.temp = self:recursiveMask(self.temp, input)
  self.gradTemp = self:recursiveMask(self.gradTemp, gradOutput)
  self.modules[1]:accGradParameters(self.temp, self.gradTemp, scale)
end
