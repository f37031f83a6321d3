-- Mean squared error: sum (x - y)^2, divided by the element count when sizeAverage.
local loss = require 'nn.kernels.loss'
local MSECriterion, parent = torch.class('nn.MSECriterion', 'nn.Criterion')

MSECriterion.__init = loss.initSizeAverage(parent)

loss.define(MSECriterion, {
  loss = 'local z = X - Y; S = S + z * z',
  grad = 'G = 2 * N * (X - Y)',
})
