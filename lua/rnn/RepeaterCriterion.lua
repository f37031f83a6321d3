-- nn.RepeaterCriterion(criterion): sums criterion over the steps of a sequence against one
-- target shared by all steps (for a Repeater's outputs).
local sequence = require 'rnn.sequence'
local RepeaterCriterion, parent = torch.class('nn.RepeaterCriterion', 'nn.Criterion')

function RepeaterCriterion:__init(criterion)
  parent.__init(self)
  self.criterion = criterion
  self.gradInput = {}
  self.clones = {}
end

RepeaterCriterion.getStepCriterion = nn.SequencerCriterion.getStepCriterion

function RepeaterCriterion:updateOutput(input, target)
  self.output = 0
  for step = 1, sequence.length('RepeaterCriterion', input) do
    self.output = self.output + self:getStepCriterion(step):forward(input[step], target)
  end
  return self.output
end

function RepeaterCriterion:updateGradInput(input, target)
  local nStep = sequence.length('RepeaterCriterion', input)
  local grads = {}
  for step = 1, nStep do grads[step] = self:getStepCriterion(step):backward(input[step], target) end
  self.gradInput = torch.isTensor(input) and sequence.stack(self.gradInput, grads, nStep) or grads
  return self.gradInput
end

-- rnn defines forward/backward themselves (no update* indirection) as upstream does.
RepeaterCriterion.forward = RepeaterCriterion.updateOutput
RepeaterCriterion.backward = RepeaterCriterion.updateGradInput
