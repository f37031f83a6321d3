-- input[1] / input[2], elementwise.
local tables = require 'nn.util.tables'
local CDivTable, parent = torch.class('nn.CDivTable', 'nn.Module')

function CDivTable:__init()
  parent.__init(self)
  self.gradInput = {}
end

function CDivTable:updateOutput(input)
  tables.tensors(self, input, 2)
  tables.sameElements(self, input)
  tables.typesLike(self, self.output, "the output's type: convert the module or the input", input, 'input', 2)
  self.output:resizeAs(input[1]):copy(input[1]):cdiv(input[2])
  return self.output
end

-- d/da (a / b) = 1 / b; d/db (a / b) = -a / b^2 = -(gradInput[1] / b) a.
function CDivTable:updateGradInput(input, gradOutput)
  tables.tensors(self, input, 2)
  tables.gradOutputLike(self, gradOutput, input[1])
  -- gradInput[1] = gradOutput / input[2]; gradInput[2] = -(gradInput[1] / input[2]) * input[1]
  local g1, g2 = self.gradInput[1] or input[1], self.gradInput[2] or input[1]
  tables.typesLike(self, g1, "gradInput[1]'s type", input, 'input', 2)
  tables.typesLike(self, g2, "gradInput[2]'s type", input, 'input')
  tables.typesLike(self, g2, "gradInput[2]'s type", { g1 }, 'gradInput')
  self.gradInput[1] = self.gradInput[1] or input[1].new()
  self.gradInput[2] = self.gradInput[2] or input[1].new()
  self.gradInput[1]:resizeAs(input[1]):copy(gradOutput):cdiv(input[2])
  self.gradInput[2]:resizeAs(input[2]):zero():addcdiv(-1, self.gradInput[1], input[2]):cmul(input[1])
  tables.trim(self.gradInput, 2)
  return self.gradInput
end
