-- Inserts |pad| entries of value along dim. pad < 0 pads before position index (index 1:
-- at the start); pad > 0 counts index from the end (index 1: after the last entry).
-- With nInputDim, dim counts after a leading batch dim.
local check = require 'torch.core.check'
local Padding, parent = torch.class('nn.Padding', 'nn.Module')

function Padding:__init(dim, pad, nInputDim, value, index)
  self.value = check.optNumber('nn.Padding', value, 'value') or 0
  self.index = check.optInt('nn.Padding', index, 'index', 1) or 1
  self.dim = check.int('nn.Padding', dim, 'dim', 1, check.MAXDIM)
  self.pad = check.int('nn.Padding', pad, 'pad')
  self.nInputDim = check.optInt('nn.Padding', nInputDim, 'nInputDim', 0, check.MAXDIM)
  self.outputSize = torch.LongStorage()
  parent.__init(self)
end

-- The dim padded, the position (1-based, in the input) before which the padding goes, |pad|.
function Padding:layout(input)
  check.tensorOf('nn.Padding', input, 'input')
  local dim = self.dim
  if self.nInputDim and input:dim() ~= self.nInputDim then dim = dim + 1 end
  if dim < 1 or dim > input:dim() then
    check.error(('nn.Padding: dimension %d out of range of %s input'):format(dim, check.sizestr(input)))
  end
  local size = input:size(dim)
  local at = self.pad > 0 and size - self.index + 2 or self.index
  if at < 1 or at > size + 1 then
    check.error(('nn.Padding: index %d out of range of dimension %d (size %d)'):format(
      self.index, dim, size))
  end
  return dim, at, math.abs(self.pad)
end

function Padding:updateOutput(input)
  local dim, at, pad = self:layout(input)
  local size = input:size(dim)
  self.outputSize:resize(input:dim()):copy(input:size())
  self.outputSize[dim] = size + pad
  self.output:resize(self.outputSize):fill(self.value)
  if at > 1 then self.output:narrow(dim, 1, at - 1):copy(input:narrow(dim, 1, at - 1)) end
  if at <= size then
    self.output:narrow(dim, at + pad, size - at + 1):copy(input:narrow(dim, at, size - at + 1))
  end
  return self.output
end

function Padding:updateGradInput(input, gradOutput)
  local dim, at, pad = self:layout(input)
  local size = input:size(dim)
  if gradOutput:dim() ~= input:dim() or gradOutput:size(dim) ~= size + pad then
    check.error(('nn.Padding: gradOutput size %s does not match output size %s'):format(
      check.sizestr(gradOutput), check.sizestr(self.output)))
  end
  self.gradInput:resizeAs(input)
  if at > 1 then self.gradInput:narrow(dim, 1, at - 1):copy(gradOutput:narrow(dim, 1, at - 1)) end
  if at <= size then
    self.gradInput:narrow(dim, at, size - at + 1):copy(gradOutput:narrow(dim, at + pad, size - at + 1))
  end
  return self.gradInput
end
