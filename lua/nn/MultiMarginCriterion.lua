-- Multi-class hinge loss: for each sample x of target class c,
-- sum over d ~= c of w[c] max(0, margin - x[c] + x[d])^p / #x  (p = 1 or 2),
-- averaged over the samples when sizeAverage.
local check = require 'torch.core.check'
local loss = require 'nn.util.loss'
local targets = require 'nn.util.targets'
local backend = require 'torch.backend'
local MultiMarginCriterion, parent = torch.class('nn.MultiMarginCriterion', 'nn.Criterion')

function MultiMarginCriterion:__init(p, weights, margin)
  if p ~= nil and p ~= 1 and p ~= 2 then
    check.error('nn.MultiMarginCriterion: only p = 1 and p = 2 are supported, got ' .. tostring(p))
  end
  parent.__init(self)
  self.p = p or 1
  self.margin = check.optNumber('nn.MultiMarginCriterion', margin, 'margin') or 1
  self.sizeAverage = true
  self.weights = loss.checkWeights('nn.MultiMarginCriterion', weights)
end

-- Validates; returns the target tensor, the sample count and the class count.
local function frames(self, input, target)
  local name = torch.type(self)
  local nframe, dim = targets.frames(self, input)
  local t = targets.tensor(self, target)
  if (input:dim() == 2 and t:dim() ~= 1) or t:nElement() ~= nframe then
    check.error(('%s: inconsistent target size %s for input of size %s'):format(
      name, check.sizestr(t), check.sizestr(input)))
  end
  targets.checkWeights(self, dim)
  targets.checkRange(self, t, nframe, dim)
  return t, nframe, dim
end

-- The passes are the op table's (nn_loss: multi_margin_forward, multi_margin_backward).
function MultiMarginCriterion:updateOutput(input, target)
  local t, nframe, dim = frames(self, input, target)
  local sum = backend.of(input).multi_margin_forward(input, t, self.weights, self.p, self.margin)
  sum = sum / dim
  if self.sizeAverage then sum = sum / nframe end
  self.output = sum
  return sum
end

function MultiMarginCriterion:updateGradInput(input, target)
  local t, nframe, dim = frames(self, input, target)
  self.gradInput:resizeAs(input)
  local g = self.sizeAverage and 1 / (nframe * dim) or 1 / dim
  backend.of(input).multi_margin_backward(self.gradInput, input, t, self.weights, self.p, self.margin, g)
  return self.gradInput
end
