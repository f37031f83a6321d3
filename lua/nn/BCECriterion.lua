-- Binary cross-entropy: -sum w (y log(x) + (1 - y) log(1 - x)) for probabilities x in [0, 1],
-- optional weights w (one per class, i.e. per column of a 2-D input). The logs are of x + 1e-12
-- and 1 - x + 1e-12 as torch7's, so that x = 0 or 1 stays finite.
local check = require 'torch.core.check'
local loss = require 'nn.util.loss'
local BCECriterion, parent = torch.class('nn.BCECriterion', 'nn.Criterion')

function BCECriterion:__init(weights, sizeAverage)
  parent.__init(self)
  self.sizeAverage = sizeAverage ~= false
  self.weights = loss.checkWeights('nn.BCECriterion', weights)
end

function BCECriterion:__len()
  return self.weights and self.weights:nElement() or 0
end

loss.define(BCECriterion, {
  weighted = true,
  loss = 'S = S - (math.log(X + 1e-12) * Y + math.log(1 - X + 1e-12) * (1 - Y)) * W',
  grad = 'G = -N * (Y - X) / ((1 - X + 1e-12) * (X + 1e-12)) * W',
  check = function(self, input)
    if input:nElement() > 0 and (input:min() < 0 or input:max() > 1) then
      check.error(('%s: input values should be between 0 and 1, got a value in [%g, %g]')
        :format(torch.type(self), input:min(), input:max()))
    end
  end,
  -- -(y (log(x + eps) - log(1 - x + eps)) + log(1 - x + eps)); (x - y) / ((1 - x + eps) (x + eps))
  device = {
    terms = function(_, r, x, y, l1x)
      l1x:mul(x, -1):add(1):add(1e-12):log()
      r:add(x, 1e-12):log():add(-1, l1x):cmul(y):add(l1x):mul(-1)
    end,
    grad = function(_, g, x, y, t)
      g:mul(x, -1):add(1):add(1e-12):cmul(t:add(x, 1e-12))
      g:cdiv(t:add(x, -1, y), g)
    end,
  },
})
