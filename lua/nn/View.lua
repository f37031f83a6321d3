-- A view of the input with the given sizes (one may be -1: inferred). Leading input dims
-- beyond the view's elements (or beyond numInputDims when set) make a batch dim.
local check = require 'torch.core.check'
local View, parent = torch.class('nn.View', 'nn.Module')

function View:__init(...)
  parent.__init(self)
  self:resetSize(...)
  self.numInputDims = nil
end

function View:resetSize(...)
  self.size = check.sizeArgs('nn.View', -1, ...)
  self.numElements = 1
  local inferred = false
  for i = 1, #self.size do
    local s = self.size[i]
    if s >= 0 then
      self.numElements = self.numElements * s
    else   -- -1 (check.sizeArgs allows no less)
      if inferred then check.error('nn.View: only one dimension can be at -1') end
      inferred = true
    end
  end
  self.inferred = inferred
  return self
end

function View:setNumInputDims(numInputDims)
  self.numInputDims = check.optInt('nn.View', numInputDims, 'numInputDims', 0, check.MAXDIM)
  return self
end

local function sizestr(size)
  local parts = {}
  for i = 1, #size do parts[i] = tostring(size[i]) end
  return table.concat(parts, 'x')
end

-- The batch size to prepend, or nil when the input is one sample.
function View:batchSize(input)
  local nd = input:dim()
  local ndim = math.min(self.numInputDims or nd, nd)
  local elements = 1
  for i = nd - ndim + 1, nd do elements = elements * input:size(i) end
  if (self.numElements == 0 and elements ~= 0)
      or (self.numElements > 0 and elements % self.numElements ~= 0) then
    check.error(('nn.View: input view (%s) and desired view (%s) do not match'):format(
      check.sizestr(input), sizestr(self.size)))
  end
  local bsz = (self.inferred or self.numElements == 0) and 1 or elements / self.numElements
  for i = 1, nd - ndim do bsz = bsz * input:size(i) end
  if bsz == 1 and (not self.numInputDims or nd <= self.numInputDims) then return nil end
  return bsz
end

function View:updateOutput(input)
  if not torch.isTensor(input) then
    check.error('nn.View: input must be a tensor, got ' .. torch.type(input))
  end
  local bsz = self:batchSize(input)
  if bsz then
    self.output:view(input, bsz, unpack(self.size:totable()))
  else
    self.output:view(input, self.size)
  end
  return self.output
end

function View:updateGradInput(input, gradOutput)
  if not torch.isTensor(gradOutput) or gradOutput:nElement() ~= input:nElement() then
    check.error(('nn.View: gradOutput size %s does not match input size %s'):format(
      torch.isTensor(gradOutput) and check.sizestr(gradOutput) or torch.type(gradOutput),
      check.sizestr(input)))
  end
  self.gradInput:view(gradOutput, input:size())
  return self.gradInput
end

function View:__tostring__()
  return ('%s(%s)'):format(torch.type(self), sizestr(self.size):gsub('x', ', '))
end
