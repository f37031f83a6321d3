-- The cosine similarity of two vectors (a 1-element output), or of each pair of rows of two
-- matrices.
require 'nn.utils'
local cosine = require 'nn.util.cosine'
local tables = require 'nn.util.tables'
local CosineDistance, parent = torch.class('nn.CosineDistance', 'nn.Module')

function CosineDistance:__init()
  parent.__init(self)
  self.gradInput = { torch.Tensor(), torch.Tensor() }
end

function CosineDistance:updateOutput(input)
  local x1, x2 = tables.pairRows(self, input)
  cosine.forward(self, x1, x2, self.output)
  self.output:resize(x1:size(1))
  return self.output
end

function CosineDistance:updateGradInput(input, gradOutput)
  local x1, x2 = tables.pairRows(self, input)
  tables.gradOutputLike(self, gradOutput, torch.LongStorage { x1:size(1) })
  self._cos = self._cos or x1.new()
  cosine.forward(self, x1, x2, self._cos)
  self.gradInput[1] = self.gradInput[1] or x1.new()
  self.gradInput[2] = self.gradInput[2] or x2.new()
  cosine.backward(self, x1, x2, gradOutput:contiguous():view(-1, 1), self.gradInput[1], self.gradInput[2])
  self.gradInput[1]:resizeAs(input[1])
  self.gradInput[2]:resizeAs(input[2])
  return self.gradInput
end

function CosineDistance:clearState()
  nn.utils.clear(self, 'buffer', 'w1', 'w22', 'w', 'w32', '_scale', '_cos')
  return parent.clearState(self)
end
