-- The sum (mean with sizeAverage) over dimension; negative dims count from the end, and with
-- nInputDims the dim counts after a leading batch dim. squeeze (default) drops the summed dim.
local check = require 'torch.core.check'
local Sum, parent = torch.class('nn.Sum', 'nn.Module')

function Sum:__init(dimension, nInputDims, sizeAverage, squeeze)
  parent.__init(self)
  self.dimension = check.int(torch.type(self), dimension or 1, 'dimension', -check.MAXDIM, check.MAXDIM)
  -- torch/nn stores nInputDims unchecked: waifu2x's SE blocks build nn.Mean(-1, -1) (a negative
  -- dimension counts from the end and never looks at nInputDims)
  self.nInputDims = check.optInt(torch.type(self), nInputDims, 'nInputDims', -check.MAXDIM, check.MAXDIM)
  self.sizeAverage = sizeAverage or false
  self.squeeze = squeeze == nil or squeeze
end

function Sum:_getPositiveDimension(input)
  check.tensorOf(torch.type(self), input, 'input')
  local dim = self.dimension
  if dim < 0 then
    dim = input:dim() + dim + 1
  elseif self.nInputDims and input:dim() == self.nInputDims + 1 then
    dim = dim + 1
  end
  if dim < 1 or dim > input:dim() then
    check.error(('%s: dimension %d out of range of %s input'):format(torch.type(self),
      self.dimension, check.sizestr(input)))
  end
  return dim
end

function Sum:updateOutput(input)
  local dim = self:_getPositiveDimension(input)
  torch.sum(self.output, input, dim)
  if self.sizeAverage then self.output:div(input:size(dim)) end
  if self.squeeze and self.output:dim() > 1 then self.output:set(self.output:select(dim, 1)) end
  return self.output
end

function Sum:updateGradInput(input, gradOutput)
  local dim = self:_getPositiveDimension(input)
  local size = input:size()
  size[dim] = 1
  if gradOutput:nElement() * input:size(dim) ~= input:nElement() then
    check.error(('%s: gradOutput size %s does not match input size %s summed over dimension %d')
      :format(torch.type(self), check.sizestr(gradOutput), check.sizestr(input), dim))
  end
  if not gradOutput:isContiguous() then
    self._gradOutput = self._gradOutput or gradOutput.new()
    gradOutput = self._gradOutput:resizeAs(gradOutput):copy(gradOutput)
  end
  self.gradInput:resizeAs(input):copy(gradOutput:view(size):expandAs(input))
  if self.sizeAverage then self.gradInput:div(input:size(dim)) end
  return self.gradInput
end

function Sum:clearState()
  return parent.clearState(self, '_gradOutput')
end
