-- input:narrow(dimension, offset, length), copied. A negative length leaves that many
-- elements less one at the end (-1 runs to the end); a negative offset (torch7's rule) keeps
-- the first size - length elements.
local check = require 'torch.core.check'
local Narrow, parent = torch.class('nn.Narrow', 'nn.Module')

function Narrow:__init(dimension, offset, length)
  parent.__init(self)
  self.dimension = check.int('nn.Narrow', dimension, 'dimension', -check.MAXDIM, check.MAXDIM)
  self.index = check.int('nn.Narrow', offset, 'offset')
  self.length = check.optInt('nn.Narrow', length, 'length') or 1
end

-- The dim, first index and length for this input, checked.
function Narrow:range(input)
  check.tensorOf('nn.Narrow', input, 'input')
  local dim = self.dimension < 0 and input:dim() + self.dimension + 1 or self.dimension
  if dim < 1 or dim > input:dim() then
    check.error(('nn.Narrow: dimension %d out of range of %s input'):format(self.dimension,
      check.sizestr(input)))
  end
  local size = input:size(dim)
  local offset, length = self.index, self.length
  if length < 0 then length = size - offset + length + 2 end
  if offset < 0 then offset, length = 1, size - length end
  if offset < 1 or length < 0 or offset + length - 1 > size then
    check.error(('nn.Narrow: offset %d and length %d out of range of dimension %d (size %d) of %s input')
      :format(self.index, self.length, dim, size, check.sizestr(input)))
  end
  return dim, offset, length
end

function Narrow:updateOutput(input)
  local dim, offset, length = self:range(input)
  local view = input:narrow(dim, offset, length)
  self.output = self.output:typeAs(view)
  self.output:resizeAs(view):copy(view)
  return self.output
end

function Narrow:updateGradInput(input, gradOutput)
  local dim, offset, length = self:range(input)
  self.gradInput = self.gradInput:typeAs(input)
  self.gradInput:resizeAs(input):zero()
  local view = self.gradInput:narrow(dim, offset, length)
  check.sameElements('nn.Narrow', view, gradOutput)
  view:copy(gradOutput)
  return self.gradInput
end
