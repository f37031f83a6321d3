-- Kullback-Leibler divergence of the target distribution y from exp(x) (x holds log-probabilities):
-- sum over y > 0 of y (log y - x).
local check = require 'torch.core.check'
local loss = require 'nn.util.loss'
local pointwise = require 'nn.util.pointwise'
local DistKLDivCriterion, parent = torch.class('nn.DistKLDivCriterion', 'nn.Criterion')

function DistKLDivCriterion:__init()
  parent.__init(self)
  self.sizeAverage = true
end

loss.define(DistKLDivCriterion, {
  loss = 'if Y > 0 then S = S + Y * (math.log(Y) - X) end',
  grad = 'G = Y > 0 and -N * Y or 0',
  check = function(self, input, target)
    if not input:isSameSizeAs(target) then
      check.error(('%s: input and target should have the same size, got %s and %s'):format(
        torch.type(self), check.sizestr(input), check.sizestr(target)))
    end
  end,
  -- with p = 1 where y > 0: p y (log(p y + 1 - p) - x) (the log of 1, not 0, where y <= 0)
  device = {
    terms = function(self, r, x, y)
      local p = pointwise.mask(self, y, 0)
      r:cmul(y, p):add(1):add(-1, p):log():add(-1, x):cmul(y):cmul(p)
    end,
    grad = function(self, g, _, y) g:cmul(y, pointwise.mask(self, y, 0)):mul(-1) end,
  },
})
