-- Child i gets entry i of the input table; the output is the table of their outputs.
local ParallelTable, parent = torch.class('nn.ParallelTable', 'nn.Container')

function ParallelTable:__init()
  parent.__init(self)
  self.modules = {}
  self.output = {}
  self.gradInput = {}
end

local function checkTable(input)
  if torch.type(input) ~= 'table' then
    error('nn.ParallelTable: expected a table as input, got ' .. torch.type(input), 3)
  end
end

function ParallelTable:updateOutput(input)
  checkTable(input)
  for i, m in ipairs(self.modules) do
    self.output[i] = self:rethrowErrors(m, i, 'updateOutput', input[i])
  end
  return self.output
end

function ParallelTable:updateGradInput(input, gradOutput)
  checkTable(input)
  for i, m in ipairs(self.modules) do
    self.gradInput[i] = self:rethrowErrors(m, i, 'updateGradInput', input[i], gradOutput[i])
  end
  return self.gradInput
end

local function eachChild(method, default)
  return function(self, input, gradOutput, arg)
    for i, m in ipairs(self.modules) do
      self:rethrowErrors(m, i, method, input[i], gradOutput[i], arg or default)
    end
  end
end
ParallelTable.accGradParameters = eachChild('accGradParameters', 1)
ParallelTable.accUpdateGradParameters = eachChild('accUpdateGradParameters', 1)

ParallelTable.__tostring__ = nn.Container._branchesToString
