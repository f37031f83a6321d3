-- nn.MaskZero(module, nInputDim[, silent]): zeroes the output (and gradOutput) rows of module
-- whose input row is all zeros (padding steps of variable-length sequences). nInputDim is the
-- number of dimensions of one sample; a first extra dimension is the batch. With table inputs
-- the first tensor decides.
local MaskZero, parent = torch.class('nn.MaskZero', 'nn.Decorator')

function MaskZero:__init(module, nInputDim, silent)
  parent.__init(self, module)
  if torch.isTypeOf(module, 'nn.AbstractRecurrent') and not silent then
    print("Warning : you are most likely using MaskZero the wrong way. You should probably use "
      .. "AbstractRecurrent:maskZero() so that it wraps the internal AbstractRecurrent.recurrentModule "
      .. "instead of wrapping the AbstractRecurrent module itself.")
  end
  if torch.type(nInputDim) ~= 'number' then
    error(('%s: expecting nInputDim number at arg 2, got %s'):format(torch.type(self), torch.type(nInputDim)))
  end
  self.nInputDim = nInputDim
end

function MaskZero:recursiveGetFirst(input)
  if torch.type(input) == 'table' then return self:recursiveGetFirst(input[1]) end
  assert(torch.isTensor(input), "MaskZero: expecting a tensor or a table of tensors")
  return input
end

-- The 2-norm of each sample of the first input tensor (one value without a batch); sets batchmode.
function MaskZero:_sampleNorms(input)
  local first = self:recursiveGetFirst(input):contiguous()
  local rows
  if first:dim() == self.nInputDim then
    self.batchmode = false
    rows = first:view(-1)
  elseif first:dim() - 1 == self.nInputDim then
    self.batchmode = true
    rows = first:view(first:size(1), -1)
  else
    error(('%s: input has %d dimensions, expecting nInputDim (%d) or nInputDim+1 (batch)')
      :format(torch.type(self), first:dim(), self.nInputDim))
  end
  self._zeroMask = self._zeroMask or rows.new()
  self._zeroMask:norm(rows, 2, rows:dim())
  return self._zeroMask
end

-- self.zeroMask: a ByteTensor, 1 for the samples that are all zeros.
function MaskZero:_computeZeroMask(input)
  local norms = self:_sampleNorms(input)
  self.zeroMask = self.zeroMask or (norms:type() == 'torch.CudaTensor' and torch.CudaByteTensor() or torch.ByteTensor())
  self.zeroMask:resize(norms:size()):copy(norms:eq(0))
  return self.zeroMask
end

function MaskZero:recursiveMask(output, input, mask)
  if torch.type(input) == 'table' then
    output = torch.type(output) == 'table' and output or {}
    for k, v in ipairs(input) do output[k] = self:recursiveMask(output[k], v, mask) end
    return output
  end
  output = torch.isTensor(output) and output or input.new()
  local maskSize = input:size():fill(1)
  if self.batchmode then maskSize[1] = input:size(1) end
  mask:resize(maskSize)
  output:resizeAs(input):copy(input):maskedFill(mask:expandAs(input), 0)
  return output
end

function MaskZero:updateOutput(input)
  self:_computeZeroMask(input)
  self.output = self:recursiveMask(self.output, self.modules[1]:updateOutput(input), self.zeroMask)
  return self.output
end

function MaskZero:updateGradInput(input, gradOutput)
  self.gradOutput = self:recursiveMask(self.gradOutput, gradOutput, self.zeroMask)
  self.gradInput = self.modules[1]:updateGradInput(input, self.gradOutput)
  return self.gradInput
end

function MaskZero:accGradParameters(input, gradOutput, scale)
  self.modules[1]:accGradParameters(input, self.gradOutput or gradOutput, scale)
end

function MaskZero:type(type, ...)
  self.zeroMask, self._zeroMask, self._maskbyte, self._maskindices = nil, nil, nil, nil
  return parent.type(self, type, ...)
end
