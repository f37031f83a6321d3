-- Concatenates a table of tensors along a dimension.
local check = require 'torch.core.check'
local tables = require 'nn.util.tables'
local JoinTable, parent = torch.class('nn.JoinTable', 'nn.Module')

function JoinTable:__init(dimension, nInputDims)
  parent.__init(self)
  self.size = torch.LongStorage()
  self.dimension = check.int('nn.JoinTable', dimension, 'dimension', -check.MAXDIM, check.MAXDIM)
  self.gradInput = {}
  self.nInputDims = check.optInt('nn.JoinTable', nInputDims, 'nInputDims', 0, check.MAXDIM)
end

function JoinTable:_getPositiveDimension(input)
  return tables.dimension(self, input[1]:dim())
end

-- The joined size: input[1]'s sizes, dim d summed. As torch/nn's JoinTable (which copies each
-- input into its slice of the output), an input need only fill its slice element for element:
-- icml2016's G joins noise of size Bx100x1x1 with text features of size Bx128 along dim 2.
local function joinedSize(self, input, d)
  local first = input[1]
  self.size:resize(first:dim()):copy(first:size())
  local others = first:nElement() / math.max(first:size(d), 1)   -- elements per index of dim d
  if first:size(d) == 0 then
    others = 1
    for k = 1, first:dim() do if k ~= d then others = others * first:size(k) end end
  end
  for i = 2, #input do
    local t = input[i]
    local ok = t:dim() >= d and t:nElement() == others * t:size(d)
    if not ok then
      check.error(('%s: input[%d] of size %s cannot be joined to input[1] of size %s along dim %d')
        :format(torch.type(self), i, check.sizestr(t), check.sizestr(first), d))
    end
    self.size[d] = self.size[d] + t:size(d)
  end
  return self.size
end

function JoinTable:updateOutput(input)
  tables.tensors(self, input)
  local d = self:_getPositiveDimension(input)
  self.output:resize(joinedSize(self, input, d))
  local offset = 1
  for _, t in ipairs(input) do
    self.output:narrow(d, offset, t:size(d)):copy(t)
    offset = offset + t:size(d)
  end
  return self.output
end

function JoinTable:updateGradInput(input, gradOutput)
  tables.tensors(self, input)
  local d = self:_getPositiveDimension(input)
  tables.gradOutputLike(self, gradOutput, joinedSize(self, input, d))
  local offset = 1
  for i, t in ipairs(input) do
    self.gradInput[i] = self.gradInput[i] or t.new()
    self.gradInput[i]:resizeAs(t):copy(gradOutput:narrow(d, offset, t:size(d)))
    offset = offset + t:size(d)
  end
  tables.trim(self.gradInput, #input)
  return self.gradInput
end

function JoinTable:type(name, cache)
  self.gradInput = {}
  return parent.type(self, name, cache)
end
