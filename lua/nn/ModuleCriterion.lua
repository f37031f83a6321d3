-- A criterion applied to inputModule(input) and targetModule(target) (either module optional);
-- the gradient flows back through inputModule, whose parameters are not updated.
local check = require 'torch.core.check'
local ModuleCriterion, parent = torch.class('nn.ModuleCriterion', 'nn.Criterion')

function ModuleCriterion:__init(criterion, inputModule, targetModule, castTarget)
  parent.__init(self)
  if not torch.isTypeOf(criterion, 'nn.Criterion') then
    check.error('nn.ModuleCriterion: expected a criterion, got ' .. torch.type(criterion))
  end
  self.criterion = criterion
  self.inputModule = check.optModule('nn.ModuleCriterion', inputModule, 'inputModule')
  self.targetModule = check.optModule('nn.ModuleCriterion', targetModule, 'targetModule')
  self.castTarget = castTarget ~= false
  if inputModule and inputModule:parameters() then
    print("Warning: nn.ModuleCriterion doesn't support parameter updates")
  end
end

function ModuleCriterion:updateOutput(input, target)
  if self.inputModule then self.input = self.inputModule:forward(input) end
  if self.targetModule then self.target = self.targetModule:forward(target) end
  self.output = self.criterion:forward(self.input or input, self.target or target)
  return self.output
end

function ModuleCriterion:updateGradInput(input, target)
  self.gradInput = self.criterion:backward(self.input or input, self.target or target)
  if self.inputModule then self.gradInput = self.inputModule:backward(input, self.gradInput) end
  return self.gradInput
end

-- The target module keeps its type unless castTarget (the default).
function ModuleCriterion:type(name, cache)
  if self.inputModule then self.inputModule:type(name, cache) end
  if self.castTarget and self.targetModule then self.targetModule:type(name, cache) end
  self.criterion:type(name, cache)
  local inputModule, targetModule, criterion = self.inputModule, self.targetModule, self.criterion
  self.inputModule, self.targetModule, self.criterion = nil, nil, nil
  parent.type(self, name, cache)
  self.inputModule, self.targetModule, self.criterion = inputModule, targetModule, criterion
  return self
end
