-- Mean absolute error: sum |x - y|, divided by the element count when sizeAverage.
local loss = require 'nn.kernels.loss'
local AbsCriterion, parent = torch.class('nn.AbsCriterion', 'nn.Criterion')

AbsCriterion.__init = loss.initSizeAverage(parent)

-- the subgradient at x == y is +1, as torch7's
loss.define(AbsCriterion, {
  loss = 'local z = X - Y; S = S + (z >= 0 and z or -z)',
  grad = 'G = X - Y >= 0 and N or -N',
})
