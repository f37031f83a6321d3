-- input:select(dimension, index), copied; negative dimension and index count from the end.
local check = require 'torch.core.check'
local Select, parent = torch.class('nn.Select', 'nn.Module')

function Select:__init(dimension, index)
  parent.__init(self)
  self.dimension = check.int('nn.Select', dimension, 'dimension', -check.MAXDIM, check.MAXDIM)
  self.index = check.int('nn.Select', index, 'index')
end

function Select:position(input)
  check.tensorOf('nn.Select', input, 'input')
  local dim = self.dimension < 0 and input:dim() + self.dimension + 1 or self.dimension
  if dim < 1 or dim > input:dim() then
    check.error(('nn.Select: dimension %d out of range of %s input'):format(self.dimension,
      check.sizestr(input)))
  end
  local index = self.index < 0 and input:size(dim) + self.index + 1 or self.index
  if index < 1 or index > input:size(dim) then
    check.error(('nn.Select: index %d out of range of dimension %d (size %d)'):format(
      self.index, dim, input:size(dim)))
  end
  return dim, index
end

function Select:updateOutput(input)
  local dim, index = self:position(input)
  local view = input:select(dim, index)
  self.output:resizeAs(view):copy(view)
  return self.output
end

function Select:updateGradInput(input, gradOutput)
  local dim, index = self:position(input)
  self.gradInput:resizeAs(input):zero()
  local view = self.gradInput:select(dim, index)
  check.sameElements('nn.Select', view, gradOutput)
  view:copy(gradOutput)
  return self.gradInput
end
