-- The elementwise sum of a table of tensors. With inplace, the output is input[1] itself
-- (overwritten) and every gradInput entry is gradOutput itself.
local tables = require 'nn.util.tables'
local CAddTable, parent = torch.class('nn.CAddTable', 'nn.Module')

function CAddTable:__init(ip)
  parent.__init(self)
  self.inplace = ip
  self.gradInput = {}
end

function CAddTable:updateOutput(input)
  tables.tensors(self, input)
  tables.sameElements(self, input)
  tables.typesLike(self, self.inplace and input[1] or self.output,
    self.inplace and "input[1]'s type: inplace" or "the output's type: convert the module or the input", input, 'input', 2)
  if self.inplace then
    tables.chain('add', input[1], input[1], input, 1)
    self.output:set(input[1])
  else
    tables.chain('add', self.output:resizeAs(input[1]), input[1], input, 1)
  end
  return self.output
end

function CAddTable:updateGradInput(input, gradOutput)
  tables.tensors(self, input)
  tables.gradOutputLike(self, gradOutput, input[1])
  if self.inplace then
    for i = 1, #input do
      tables.gradOutputType(self, gradOutput, self.gradInput[i] or input[1], "gradInput's type: inplace")
    end
  end
  for i = 1, #input do
    self.gradInput[i] = self.gradInput[i] or input[1].new()
    if self.inplace then
      self.gradInput[i]:set(gradOutput)
    else
      tables.copy(self.gradInput[i]:resizeAs(input[i]), gradOutput)
    end
  end
  tables.trim(self.gradInput, #input)
  return self.gradInput
end
