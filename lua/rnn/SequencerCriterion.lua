-- nn.SequencerCriterion(criterion[, sizeAverage]): sums criterion over the steps of a sequence
-- (tensor or table), each step with its own clone; sizeAverage divides by the number of steps.
local sequence = require 'rnn.sequence'
local SequencerCriterion, parent = torch.class('nn.SequencerCriterion', 'nn.Criterion')

function SequencerCriterion:__init(criterion, sizeAverage)
  parent.__init(self)
  if torch.isTypeOf(criterion, 'nn.ModuleCriterion') then
    error("SequencerCriterion shouldn't decorate a ModuleCriterion. Instead, try the other way around : "
      .. "ModuleCriterion decorates a SequencerCriterion. Its modules can also be similarly decorated with a Sequencer.")
  end
  self.criterion = criterion
  self.sizeAverage = sizeAverage or false
  self.clones = {}
  self.gradInput = {}
end

function SequencerCriterion:getStepCriterion(step)
  assert(step, "expecting step at arg 1")
  local criterion = self.clones[step]
  if not criterion then
    criterion = self.criterion:clone()
    self.clones[step] = criterion
  end
  return criterion
end

function SequencerCriterion:updateOutput(input, target)
  local nStep = sequence.length('SequencerCriterion', input, target, 'target')
  self.output = 0
  for step = 1, nStep do
    self.output = self.output + self:getStepCriterion(step):forward(input[step], target[step])
  end
  if self.sizeAverage then self.output = self.output / nStep end
  return self.output
end

local function scaleAll(t, factor)
  if torch.isTensor(t) then t:mul(factor) else for _, v in pairs(t) do scaleAll(v, factor) end end
end

function SequencerCriterion:updateGradInput(input, target)
  local nStep = sequence.length('SequencerCriterion', input, target, 'target')
  local grads = {}
  for step = 1, nStep do
    grads[step] = self:getStepCriterion(step):backward(input[step], target[step])
    if self.sizeAverage then scaleAll(grads[step], 1 / nStep) end
  end
  self.gradInput = torch.isTensor(input) and sequence.stack(self.gradInput, grads, nStep) or grads
  return self.gradInput
end
