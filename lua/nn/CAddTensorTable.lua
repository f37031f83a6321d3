-- Adds one tensor to each entry of a table: { v, {a, b, c} } -> { v + a, v + b, v + c }.
local check = require 'torch.core.check'
local CAddTensorTable, parent = torch.class('nn.CAddTensorTable', 'nn.Module')

function CAddTensorTable:__init()
  parent.__init(self)
  self.gradInput = {}
end

local function validate(self, input)
  if torch.type(input) ~= 'table' or not torch.isTensor(input[1]) or torch.type(input[2]) ~= 'table' then
    check.error(torch.type(self) .. ': input must be a table {tensor, table of tensors}')
  end
  local n = input[1]:nElement()
  for i, x in ipairs(input[2]) do
    if not torch.isTensor(x) or x:nElement() ~= n then
      check.error(('%s: input[2][%d] must be a tensor of size %s'):format(
        torch.type(self), i, check.sizestr(input[1])))
    end
  end
end

function CAddTensorTable:updateOutput(input)
  validate(self, input)
  local v, xs = input[1], input[2]
  local output = torch.type(self.output) == 'table' and self.output or {}
  for i, x in ipairs(xs) do
    output[i] = (output[i] or v.new()):resizeAs(v):copy(x):add(v)
  end
  for i = #output, #xs + 1, -1 do output[i] = nil end
  self.output = output
  return output
end

function CAddTensorTable:updateGradInput(input, gradOutput)
  validate(self, input)
  local v, xs = input[1], input[2]
  self.gradInput[1] = (self.gradInput[1] or v.new()):resizeAs(v):zero()
  local rest = self.gradInput[2] or {}
  for i = 1, #xs do
    self.gradInput[1]:add(gradOutput[i])
    rest[i] = (rest[i] or v.new()):resizeAs(v):copy(gradOutput[i])
  end
  for i = #rest, #xs + 1, -1 do rest[i] = nil end
  self.gradInput[2] = rest
  return self.gradInput
end
