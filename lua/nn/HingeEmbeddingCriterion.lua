-- Loss of a distance x between two items that are alike (y = 1: x) or not (y = -1:
-- max(0, margin - x)); y is a tensor like x or one number for all of x.
local check = require 'torch.core.check'
local loss = require 'nn.util.loss'
local pointwise = require 'nn.util.pointwise'
local HingeEmbeddingCriterion, parent = torch.class('nn.HingeEmbeddingCriterion', 'nn.Criterion')

function HingeEmbeddingCriterion:__init(margin)
  parent.__init(self)
  self.margin = check.optNumber('nn.HingeEmbeddingCriterion', margin, 'margin') or 1
  self.sizeAverage = true
end

-- as torch7's, x counts unless y == -1 and the hinge unless y == 1
loss.define(HingeEmbeddingCriterion, {
  loss = 'if Y ~= -1 then S = S + X end; if Y ~= 1 and X < M then S = S + M - X end',
  grad = 'G = (Y == -1 and X > M) and 0 or N * Y',
  target = function(self, input, y)
    if type(y) ~= 'number' then return y end
    self._y = self._y or input.new()
    return self._y:resizeAs(input):fill(y)
  end,
  -- (y ~= -1) x + (y ~= 1) max(0, margin - x); y, but 0 where y == -1 and x > margin
  device = {
    terms = function(self, r, x, y, t, margin)
      local hinge = pointwise.scratch(self, '_hinge', x):mul(x, -1):add(margin):cmax(0)
      r:ne(y, -1):cmul(x):addcmul(t:ne(y, 1), hinge)
    end,
    grad = function(self, g, x, y, _, margin)
      g:eq(y, -1):cmul(pointwise.mask(self, x, margin)):mul(-1):add(1):cmul(y)
    end,
  },
})
