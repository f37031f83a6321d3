-- Class-index targets (1-based) of the classification criterions: a number or a tensor of any
-- type. The loops reading them (the range check, and the passes of ClassNLLCriterion,
-- SpatialClassNLLCriterion, MultiMarginCriterion, MultiLabelMarginCriterion) are the op
-- table's (the nn_loss family).
local check = require 'torch.core.check'
local backend = require 'torch.backend'
local loss = require 'nn.util.loss'

local targets = {}

-- target as a tensor: a number goes into a 1-element buffer kept in self._targetNumber.
function targets.tensor(self, target)
  if type(target) == 'number' then
    self._targetNumber = self._targetNumber or torch.DoubleTensor(1)
    self._targetNumber[1] = target
    return self._targetNumber
  end
  if not torch.isTensor(target) then
    check.error(('%s: target must be a number or a tensor, got %s'):format(
      torch.type(self), torch.type(target)))
  end
  return target
end

-- Checks self.weights (a public field, also read from files) against nClasses: classWeight
-- reads it through its first stride, so it must be 1-D with one weight per class.
function targets.checkWeights(self, nClasses)
  local w = self.weights
  if w ~= nil and not (torch.isTensor(w) and w:dim() == 1 and w:size(1) == nClasses) then
    check.error(('%s: weights should be defined for all %d classes or none, got weights of size %s')
      :format(torch.type(self), nClasses, torch.isTensor(w) and check.sizestr(w) or torch.type(w)))
  end
end

-- Checks that t's first `count` class indices (1-D, a host tensor) are integers in
-- [1, nClasses] (or `ignore`).
function targets.checkRange(self, t, count, nClasses, ignore)
  loss.checkHost(self, t)
  local c = backend.of(t).class_target_check(t, count, nClasses, ignore)
  if c ~= nil then
    check.error(('%s: target %s out of range, expected a class index in [1, %d]'):format(
      torch.type(self), tostring(c), nClasses))
  end
end

-- Validates a 1-D or 2-D input of samples; returns the sample count and the row length.
function targets.frames(self, input)
  local name = torch.type(self)
  check.tensorOf(name, input, 'input')
  loss.checkHost(self, input)
  if input:dim() ~= 1 and input:dim() ~= 2 then
    check.error(('%s: input must be 1-D or 2-D, got %s'):format(name, check.sizestr(input)))
  end
  if input:dim() == 1 then return 1, input:size(1) end
  return input:size(1), input:size(2)
end

-- The target tensor t where the CPU can read it (a host copy of a device tensor), for checks.
function targets.host(t)
  if backend.onHost(t) then return t end
  return t:double()
end

-- Sets a class criterion's loss from the weighted sum and the total weight (averaged over the
-- total weight with sizeAverage); returns the loss and the total weight, as torch7.
function targets.finish(self, sum, total)
  if self.sizeAverage and total ~= 0 then sum = sum / total end
  self.output = sum
  self.output_tensor[1] = sum
  self.total_weight_tensor[1] = total
  return self.output, total
end

return targets
