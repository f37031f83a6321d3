-- The weighted sum of criterions all applied to the same input and target.
require 'nn.utils'
local check = require 'torch.core.check'
local MultiCriterion, parent = torch.class('nn.MultiCriterion', 'nn.Criterion')

function MultiCriterion:__init()
  parent.__init(self)
  self.criterions = {}
  self.weights = torch.DoubleStorage()
end

function MultiCriterion:add(criterion, weight)
  if not torch.isTypeOf(criterion, 'nn.Criterion') then
    check.error('nn.MultiCriterion:add: expected a criterion, got ' .. torch.type(criterion))
  end
  table.insert(self.criterions, criterion)
  self.weights:resize(#self.criterions, true)
  self.weights[#self.criterions] = weight or 1
  return self
end

function MultiCriterion:updateOutput(input, target)
  self.output = 0
  for i, criterion in ipairs(self.criterions) do
    self.output = self.output + self.weights[i] * criterion:updateOutput(input, target)
  end
  return self.output
end

function MultiCriterion:updateGradInput(input, target)
  self.gradInput = nn.utils.recursiveResizeAs(self.gradInput, input)
  nn.utils.recursiveFill(self.gradInput, 0)
  for i, criterion in ipairs(self.criterions) do
    nn.utils.recursiveAdd(self.gradInput, self.weights[i], criterion:updateGradInput(input, target))
  end
  return self.gradInput
end

function MultiCriterion:type(name, cache)
  for _, criterion in ipairs(self.criterions) do criterion:type(name, cache) end
  return parent.type(self, name, cache)
end
