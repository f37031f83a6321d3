-- Splits a tensor along a dimension into a table of its slices (views).
local check = require 'torch.core.check'
local tables = require 'nn.util.tables'
local SplitTable, parent = torch.class('nn.SplitTable', 'nn.Module')

function SplitTable:__init(dimension, nInputDims)
  parent.__init(self)
  self.dimension = check.int('nn.SplitTable', dimension, 'dimension', -check.MAXDIM, check.MAXDIM)
  self.nInputDims = check.optInt('nn.SplitTable', nInputDims, 'nInputDims', 0, check.MAXDIM)
end

function SplitTable:_getPositiveDimension(input)
  return tables.dimension(self, input:dim())
end

function SplitTable:updateOutput(input)
  check.tensorOf(torch.type(self), input, 'input')
  local d = self:_getPositiveDimension(input)
  local output = {}
  for i = 1, input:size(d) do output[i] = input:select(d, i) end
  self.output = output
  return output
end

function SplitTable:updateGradInput(input, gradOutput)
  local d = self:_getPositiveDimension(input)
  tables.tensors(self, gradOutput, input:size(d), 'gradOutput')
  self.gradInput:resizeAs(input)
  for i = 1, input:size(d) do
    local slice = self.gradInput:select(d, i)
    tables.gradOutputLike(self, gradOutput[i], slice)
    slice:copy(gradOutput[i])
  end
  return self.gradInput
end
