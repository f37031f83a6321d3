-- {t, indices} -> t:index(dimension, indices); no gradient flows to the indices.
local check = require 'torch.core.check'
local Index, parent = torch.class('nn.Index', 'nn.Module')

function Index:__init(dimension)
  parent.__init(self)
  self.dimension = check.int('nn.Index', dimension, 'dimension', 1, check.MAXDIM)
  self.gradInput = { self.gradInput, self.gradInput.new() }
end

local function unpackInput(input)
  if type(input) ~= 'table' or not torch.isTensor(input[1]) or not torch.isTensor(input[2]) then
    check.error('nn.Index: input must be a table {tensor, LongTensor of indices}')
  end
  return input[1], input[2]
end

function Index:updateOutput(input)
  local t, index = unpackInput(input)
  self.output:index(t, self.dimension, index)
  return self.output
end

function Index:updateGradInput(input, gradOutput)
  local t, index = unpackInput(input)
  self.gradInput[2]:resize(index:size()):zero()
  self.gradInput[1]:resizeAs(t):zero():indexAdd(self.dimension, index, gradOutput)
  return self.gradInput
end

function Index:clearState()
  self.gradInput[1]:set()
  self.gradInput[2]:set()
  self.output:set()
  return self
end
