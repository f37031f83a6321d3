-- Outputs one entry of the input table (negative indices count from the end); the gradient
-- is zero for the other entries.
require 'nn.utils'
local check = require 'torch.core.check'
local SelectTable, parent = torch.class('nn.SelectTable', 'nn.Module')

function SelectTable:__init(index)
  parent.__init(self)
  self.index = index
  self.gradInput = {}
end

local function position(self, input)
  if torch.type(input) ~= 'table' then
    check.error(('%s: input must be a table, got %s'):format(torch.type(self), torch.type(input)))
  end
  local index = self.index
  if type(index) == 'number' and index < 0 then index = #input + index + 1 end
  if input[index] == nil then
    check.error(('%s: index %s does not exist in an input table of %d entries'):format(
      torch.type(self), tostring(self.index), #input))
  end
  return index
end

function SelectTable:updateOutput(input)
  self.output = input[position(self, input)]
  return self.output
end

-- t1 becomes a zero-filled copy of the structure of t2 (tensors reused where present).
local function zeroLike(t1, t2)
  for k, v in pairs(t2) do
    if torch.type(v) == 'table' then
      t1[k] = zeroLike(torch.type(t1[k]) == 'table' and t1[k] or {}, v)
    elseif torch.isTensor(v) then
      t1[k] = (torch.isTensor(t1[k]) and t1[k] or v.new()):resizeAs(v):zero()
    else
      t1[k] = nil
    end
  end
  for k in pairs(t1) do
    if t2[k] == nil then t1[k] = nil end
  end
  return t1
end

function SelectTable:updateGradInput(input, gradOutput)
  local index = position(self, input)
  zeroLike(self.gradInput, input)
  -- copied rather than shared: the entry's size may change from call to call
  self.gradInput[index] = nn.utils.recursiveCopy(self.gradInput[index], gradOutput)
  return self.gradInput
end

function SelectTable:type(name, cache)
  self.gradInput = {}
  self.output = {}
  return parent.type(self, name, cache)
end

function SelectTable:clearState()
  self.output, self.gradInput = {}, {}
  return self
end

function SelectTable:__tostring__()
  return torch.type(self) .. '(' .. tostring(self.index) .. ')'
end
