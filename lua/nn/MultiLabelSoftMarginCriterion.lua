-- Independent logistic losses per label: -sum w (y log p + (1 - y) log(1 - p)), p = sigmoid(x),
-- computed in the stable form log(1 + exp(-|x|)) + max(x, 0) - x y. Optional weights, one per
-- label (column of a 2-D input).
local loss = require 'nn.util.loss'
local MultiLabelSoftMarginCriterion, parent =
  torch.class('nn.MultiLabelSoftMarginCriterion', 'nn.Criterion')

function MultiLabelSoftMarginCriterion:__init(weights, sizeAverage)
  parent.__init(self)
  self.sizeAverage = sizeAverage ~= false
  self.weights = loss.checkWeights('nn.MultiLabelSoftMarginCriterion', weights)
end

loss.define(MultiLabelSoftMarginCriterion, {
  weighted = true,
  loss = 'local a = X < 0 and -X or X; '
    .. 'S = S + (math.log(1 + math.exp(-a)) + (X > 0 and X or 0) - X * Y) * W',
  grad = 'G = N * (1 / (1 + math.exp(-X)) - Y) * W',
  -- log1p(exp(-|x|)) + max(x, 0) - x y; sigmoid(x) - y
  device = {
    terms = function(_, r, x, y, t)
      r:abs(x):mul(-1):exp():log1p():add(t:cmax(x, 0)):addcmul(-1, x, y)
    end,
    grad = function(_, g, x, y) g:sigmoid(x):add(-1, y) end,
  },
})
