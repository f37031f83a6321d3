-- Decorator that raises as soon as its module's output, gradInput or gradient parameters hold a
-- NaN, saying where it came from (input, parameters, gradOutput): finds the source of NaNs.
-- Each instance gets an id (1, 2, ... in creation order) shown in the messages.
local NaN, parent = torch.class('nn.NaN', 'nn.Decorator')

local lastId = 0
function NaN.newId()
  lastId = lastId + 1
  return lastId
end

function NaN:__init(module, id)
  parent.__init(self, module)
  self.id = id or NaN.newId()
end

-- Whether a tensor, or any tensor in a (nested) table, holds a NaN.
function NaN:recursiveIsNaN(x)
  if torch.type(x) == 'table' then
    for _, v in pairs(x) do
      if self:recursiveIsNaN(v) then return true end
    end
    return false
  end
  local sum = x:sum()
  return sum ~= sum
end

function NaN:_fail(where)
  error(('NaN found in %s of module :\n%s'):format(where, self:__tostring__()), 3)
end

function NaN:updateOutput(input)
  self.output = self.modules[1]:updateOutput(input)
  if self:recursiveIsNaN(self.output) then
    if self:recursiveIsNaN(input) then self:_fail('input') end
    if self:recursiveIsNaN(self:parameters() or {}) then self:_fail('parameters') end
    self:_fail('output')
  end
  return self.output
end

function NaN:updateGradInput(input, gradOutput)
  self.gradInput = self.modules[1]:updateGradInput(input, gradOutput)
  if self:recursiveIsNaN(self.gradInput) then
    if self:recursiveIsNaN(gradOutput) then self:_fail('gradOutput') end
    self:_fail('gradInput')
  end
  return self.gradInput
end

function NaN:accGradParameters(input, gradOutput, scale)
  self.modules[1]:accGradParameters(input, gradOutput, scale)
  local _, gradParams = self:parameters()
  if self:recursiveIsNaN(gradParams or {}) then self:_fail('gradParameters') end
end

function NaN:__tostring__()
  local inner = self.modules[1]
  return ('%s(%s) @ %s'):format(torch.type(self), tostring(self.id),
    inner.__tostring__ and inner:__tostring__() or torch.type(inner))
end
