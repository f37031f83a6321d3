-- Mean absolute error: sum |x - y|, divided by the element count when sizeAverage.
local loss = require 'nn.util.loss'
local AbsCriterion, parent = torch.class('nn.AbsCriterion', 'nn.Criterion')

AbsCriterion.__init = loss.initSizeAverage(parent)

-- the subgradient at x == y is +1, as torch7's
loss.define(AbsCriterion, {
  loss = 'local z = X - Y; S = S + (z >= 0 and z or -z)',
  grad = 'G = X - Y >= 0 and N or -N',
  device = {
    terms = function(_, r, x, y) r:add(x, -1, y):abs() end,
    grad = function(_, g, x, y, z) g:ge(z:add(x, -1, y), 0):mul(2):add(-1) end,   -- 1 where x >= y, else -1
  },
})
