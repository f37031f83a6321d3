-- input[1] - input[2], elementwise.
local tables = require 'nn.util.tables'
local CSubTable, parent = torch.class('nn.CSubTable', 'nn.Module')

function CSubTable:__init()
  parent.__init(self)
  self.gradInput = {}
end

function CSubTable:updateOutput(input)
  tables.tensors(self, input, 2)
  tables.sameElements(self, input)
  tables.typesLike(self, self.output, "the output's type: convert the module or the input", input, 'input', 2)
  self.output:resizeAs(input[1]):copy(input[1]):add(-1, input[2])
  return self.output
end

function CSubTable:updateGradInput(input, gradOutput)
  tables.tensors(self, input, 2)
  tables.gradOutputLike(self, gradOutput, input[1])
  self.gradInput[1] = self.gradInput[1] or input[1].new()
  self.gradInput[2] = self.gradInput[2] or input[1].new()
  self.gradInput[1]:resizeAs(input[1]):copy(gradOutput)
  self.gradInput[2]:resizeAs(input[2]):copy(gradOutput):mul(-1)
  tables.trim(self.gradInput, 2)
  return self.gradInput
end
