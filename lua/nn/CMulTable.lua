-- The elementwise product of a table of tensors.
local tables = require 'nn.util.tables'
local CMulTable, parent = torch.class('nn.CMulTable', 'nn.Module')

function CMulTable:__init()
  parent.__init(self)
  self.gradInput = {}
end

function CMulTable:updateOutput(input)
  tables.tensors(self, input)
  tables.sameElements(self, input)
  tables.typesLike(self, self.output, "the output's type: convert the module or the input", input, 'input', 2)
  tables.chain('mul', self.output:resizeAs(input[1]), input[1], input, 1)
  return self.output
end

-- The gradient of input i is gradOutput times the product of the other inputs (computed as
-- such, not as output / input[i], so that zeros in the inputs are fine).
function CMulTable:updateGradInput(input, gradOutput)
  tables.tensors(self, input)
  tables.gradOutputLike(self, gradOutput, input[1])
  for i = 1, #input do   -- gradInput[i] is gradOutput times every other input
    tables.typesLike(self, self.gradInput[i] or input[1], ('gradInput[%d]\'s type'):format(i), input, 'input', 1, i)
  end
  for i = 1, #input do
    self.gradInput[i] = self.gradInput[i] or input[1].new()
    tables.chain('mul', self.gradInput[i]:resizeAs(input[i]), gradOutput, input, i)
  end
  tables.trim(self.gradInput, #input)
  return self.gradInput
end
