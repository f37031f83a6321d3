-- The weighted sum of criterions, the i-th applied to input[i] and target[i] (or to the one
-- target shared by all when repeatTarget).
require 'nn.utils'
local check = require 'torch.core.check'
local ParallelCriterion, parent = torch.class('nn.ParallelCriterion', 'nn.Criterion')

function ParallelCriterion:__init(repeatTarget)
  parent.__init(self)
  self.criterions = {}
  self.weights = {}
  self.gradInput = {}
  self.repeatTarget = repeatTarget
end

function ParallelCriterion:add(criterion, weight)
  if not torch.isTypeOf(criterion, 'nn.Criterion') then
    check.error('nn.ParallelCriterion:add: expected a criterion, got ' .. torch.type(criterion))
  end
  table.insert(self.criterions, criterion)
  table.insert(self.weights, weight or 1)
  return self
end

local function validate(self, input)
  if type(input) ~= 'table' or #input < #self.criterions then
    check.error(('%s: input must be a table of %d entries, got %s'):format(torch.type(self),
      #self.criterions, type(input) == 'table' and #input .. ' entries' or torch.type(input)))
  end
end

function ParallelCriterion:updateOutput(input, target)
  validate(self, input)
  self.output = 0
  for i, criterion in ipairs(self.criterions) do
    local t = self.repeatTarget and target or target[i]
    self.output = self.output + self.weights[i] * criterion:updateOutput(input[i], t)
  end
  return self.output
end

function ParallelCriterion:updateGradInput(input, target)
  validate(self, input)
  self.gradInput = nn.utils.recursiveResizeAs(self.gradInput, input)
  nn.utils.recursiveFill(self.gradInput, 0)
  for i, criterion in ipairs(self.criterions) do
    local t = self.repeatTarget and target or target[i]
    nn.utils.recursiveAdd(self.gradInput[i], self.weights[i], criterion:updateGradInput(input[i], t))
  end
  return self.gradInput
end

function ParallelCriterion:type(name, cache)
  self.gradInput = {}
  return parent.type(self, name, cache)
end
