-- Negative log-likelihood of 1-based class indices: input holds log-probabilities, one row per
-- sample (1-D: one sample); loss = -sum_i w[t_i] x[i][t_i], divided by sum_i w[t_i] when
-- sizeAverage. Samples whose target is ignoreIndex count for nothing. The passes are ops of the
-- input's backend (class_nll_forward / class_nll_backward: backend/cpu/nn_loss.lua on CPU,
-- backend/cuda/nn.lua on CUDA); a device target is checked through a host copy.
local check = require 'torch.core.check'
local backend = require 'torch.backend'
local loss = require 'nn.util.loss'
local targets = require 'nn.util.targets'
local ClassNLLCriterion, parent = torch.class('nn.ClassNLLCriterion', 'nn.Criterion')
ClassNLLCriterion._deviceKernel = true

function ClassNLLCriterion:__init(weights, sizeAverage, ignoreIndex)
  parent.__init(self)
  self.sizeAverage = sizeAverage ~= false
  self.ignoreIndex = check.optNumber('nn.ClassNLLCriterion', ignoreIndex, 'ignoreIndex') or -100
  self.weights = loss.checkWeights('nn.ClassNLLCriterion', weights)
  self.output_tensor = torch.zeros(1)
  self.total_weight_tensor = torch.ones(1)
end

function ClassNLLCriterion:__len()
  return self.weights and self.weights:nElement() or 0
end

-- Validates; returns the target tensor.
local function frames(self, input, target)
  local name = torch.type(self)
  local nframe, nclass = targets.frames(self, input)
  local t = targets.tensor(self, target)
  if t:dim() > 1 then
    check.error(('%s: multi-target not supported, target must be 1-D, got %s'):format(
      name, check.sizestr(t)))
  end
  if input:dim() == 1 and t:nElement() > 1 then
    t = t:narrow(1, 1, 1)   -- one sample: torch7 read the target's first element, whatever its size
  elseif t:nElement() ~= nframe then
    check.error(('%s: target size %s does not match input size %s (%d samples)'):format(
      name, check.sizestr(t), check.sizestr(input), nframe))
  end
  targets.checkWeights(self, nclass)
  targets.checkRange(self, targets.host(t), nframe, nclass, self.ignoreIndex)
  return t
end

function ClassNLLCriterion:updateOutput(input, target)
  local t = frames(self, input, target)
  return targets.finish(self, backend.of(input).class_nll_forward(input, t, self.weights, self.ignoreIndex))
end

function ClassNLLCriterion:updateGradInput(input, target)
  local t = frames(self, input, target)
  self.gradInput:resizeAs(input)
  backend.of(input).class_nll_backward(self.gradInput, t, self.weights, self.ignoreIndex, self.sizeAverage)
  return self.gradInput
end
