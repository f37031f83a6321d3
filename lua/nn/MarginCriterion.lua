-- Two-class hinge loss: sum max(0, margin - x y) for targets y in {-1, 1}.
local check = require 'torch.core.check'
local loss = require 'nn.util.loss'
local pointwise = require 'nn.util.pointwise'
local MarginCriterion, parent = torch.class('nn.MarginCriterion', 'nn.Criterion')

function MarginCriterion:__init(margin)
  parent.__init(self)
  self.sizeAverage = true
  self.margin = check.optNumber('nn.MarginCriterion', margin, 'margin') or 1
end

loss.define(MarginCriterion, {
  loss = 'local z = M - X * Y; if z > 0 then S = S + z end',
  grad = 'G = X * Y < M and -N * Y or 0',
  device = {
    terms = function(_, r, x, y, _, margin) r:cmul(x, y):mul(-1):add(margin):cmax(0) end,
    grad = function(self, g, x, y, t, margin)
      g:cmul(y, pointwise.mask(self, t:cmul(x, y):mul(-1):add(margin), 0)):mul(-1)
    end,
  },
})
