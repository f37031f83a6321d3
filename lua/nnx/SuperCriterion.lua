-- A weighted sum of criterions over a table of inputs: criterion i sees input[i] and target[i]
-- (or the one shared target when target is not a table).
local SuperCriterion, parent = torch.class('nn.SuperCriterion', 'nn.Criterion')

function SuperCriterion:__init()
  parent.__init(self)
  self.criterions = {}
  self.weights = {}
  self.gradInput = {}
end

function SuperCriterion:add(criterion, weight)
  table.insert(self.criterions, criterion)
  table.insert(self.weights, weight or 1)
  return self
end

local function targetOf(target, i)
  if type(target) == 'table' then return target[i] end
  return target
end

function SuperCriterion:updateOutput(input, target)
  self.output = 0
  for i, criterion in ipairs(self.criterions) do
    self.output = self.output + self.weights[i] * criterion:updateOutput(input[i], targetOf(target, i))
  end
  return self.output
end

function SuperCriterion:updateGradInput(input, target)
  for i, criterion in ipairs(self.criterions) do
    local grad = criterion:updateGradInput(input[i], targetOf(target, i))
    self.gradInput[i] = self.gradInput[i] or grad.new()
    self.gradInput[i]:resizeAs(grad):copy(grad):mul(self.weights[i])
  end
  return self.gradInput
end
