-- Feeds the input (a tensor or a table) to every child; the output is the table of their
-- outputs.
local ConcatTable, parent = torch.class('nn.ConcatTable', 'nn.Container')

function ConcatTable:__init()
  parent.__init(self)
  self.modules = {}
  self.output = {}
end

function ConcatTable:updateOutput(input)
  for i, m in ipairs(self.modules) do
    self.output[i] = self:rethrowErrors(m, i, 'updateOutput', input)
  end
  for i = #self.modules + 1, #self.output do self.output[i] = nil end
  return self.output
end

local function gradOutputEntries(self, gradOutput)
  if torch.type(gradOutput) ~= 'table' then
    error('nn.ConcatTable: gradOutput must be a table (one entry per module), got ' .. torch.type(gradOutput), 3)
  end
  return function(i) return gradOutput[i] end
end

function ConcatTable:updateGradInput(input, gradOutput)
  return self:_sumGradInputs('updateGradInput', input, gradOutputEntries(self, gradOutput))
end

function ConcatTable:backward(input, gradOutput, scale)
  return self:_sumGradInputs('backward', input, gradOutputEntries(self, gradOutput), scale or 1)
end

local function eachChild(method)
  return function(self, input, gradOutput, arg)
    for i, m in ipairs(self.modules) do self:rethrowErrors(m, i, method, input, gradOutput[i], arg) end
  end
end
ConcatTable.accGradParameters = eachChild('accGradParameters')
ConcatTable.accUpdateGradParameters = eachChild('accUpdateGradParameters')

ConcatTable.__tostring__ = nn.Container._branchesToString
