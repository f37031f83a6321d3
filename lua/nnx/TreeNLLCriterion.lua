-- The loss after SoftMaxTree, whose output is already the log-likelihood of each target:
-- -mean(input). The targets are ignored (SoftMaxTree consumed them).
local TreeNLLCriterion, parent = torch.class('nn.TreeNLLCriterion', 'nn.Criterion')

function TreeNLLCriterion:updateOutput(input, target)
  self.output = -input:mean()
  return self.output
end

function TreeNLLCriterion:updateGradInput(input, target)
  self.gradInput:resizeAs(input):fill(-1 / input:nElement())
  return self.gradInput
end
