-- The dot product of two vectors (a 1-element output), or of each pair of rows of two matrices.
local tables = require 'nn.util.tables'
local DotProduct, parent = torch.class('nn.DotProduct', 'nn.Module')

function DotProduct:__init()
  parent.__init(self)
  self.gradInput = { torch.Tensor(), torch.Tensor() }
end

function DotProduct:updateOutput(input)
  local x1, x2 = tables.pairRows(self, input)
  self.buffer = self.buffer or x1.new()
  self.output:sum(self.buffer:cmul(x1, x2), 2)
  self.output:resize(x1:size(1))
  return self.output
end

function DotProduct:updateGradInput(input, gradOutput)
  local x1, x2 = tables.pairRows(self, input)
  tables.gradOutputLike(self, gradOutput, torch.LongStorage { x1:size(1) })
  self.gradInput[1] = self.gradInput[1] or x1.new()
  self.gradInput[2] = self.gradInput[2] or x2.new()
  local go = gradOutput:contiguous():view(-1, 1):expandAs(x1)
  self.gradInput[1]:resizeAs(x1):copy(x2):cmul(go):resizeAs(input[1])
  self.gradInput[2]:resizeAs(x2):copy(x1):cmul(go):resizeAs(input[2])
  return self.gradInput
end

function DotProduct:clearState()
  if self.buffer then self.buffer:set() end
  return parent.clearState(self)
end
