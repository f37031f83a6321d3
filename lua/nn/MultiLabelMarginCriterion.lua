-- Multi-label hinge loss: each sample lists its target classes first in its target row (1-based,
-- ended by a 0 or the row's end); loss = sum over listed j and unlisted d of
-- max(0, 1 - x[j] + x[d]) / #x, averaged over samples when sizeAverage. self.isTarget marks
-- the listed classes as torch7's does.
local check = require 'torch.core.check'
local loss = require 'nn.util.loss'
local targets = require 'nn.util.targets'
local backend = require 'torch.backend'
local MultiLabelMarginCriterion, parent =
  torch.class('nn.MultiLabelMarginCriterion', 'nn.Criterion')

function MultiLabelMarginCriterion:__init()
  parent.__init(self)
  self.sizeAverage = true
  self.isTarget = torch.Tensor()
end

-- Validates; fills self.isTarget; returns the target, the sample count and the class count.
local function frames(self, input, target)
  local name = torch.type(self)
  local nframe, dim = targets.frames(self, input)
  check.tensorOf(name, target, 'target')
  loss.checkHost(self, target)
  -- the kernels walk the target with the input's rows and columns: same sizes, not just count
  if not target:isSameSizeAs(input) then
    check.error(('%s: inconsistent target size %s for input of size %s'):format(
      name, check.sizestr(target), check.sizestr(input)))
  end
  if target:nElement() > 0 and not (target:min() >= 0 and target:max() <= dim) then
    check.error(('%s: target out of range, expected class indices in [1, %d] or 0, got values in [%s, %s]')
      :format(name, dim, tostring(target:min()), tostring(target:max())))
  end
  self.isTarget = self.isTarget:typeAs(input):resize(target:size()):zero()
  backend.of(input).multi_label_margin_mark(self.isTarget, target)
  return target, nframe, dim
end

-- The passes are the op table's (nn_loss: multi_label_margin_mark, multi_label_margin: the
-- summed hinges max(0, 1 - x[j] + x[d]) over listed classes j and unlisted d, and their
-- gradient).

function MultiLabelMarginCriterion:updateOutput(input, target)
  local t, nframe, dim = frames(self, input, target)
  local sum = backend.of(input).multi_label_margin(input, t, self.isTarget) / dim
  if self.sizeAverage then sum = sum / nframe end
  self.output = sum
  return sum
end

function MultiLabelMarginCriterion:updateGradInput(input, target)
  local t, nframe, dim = frames(self, input, target)
  local g = self.sizeAverage and 1 / (nframe * dim) or 1 / dim
  self.gradInput:resizeAs(input):zero()
  backend.of(input).multi_label_margin(input, t, self.isTarget, g, self.gradInput)
  return self.gradInput
end
