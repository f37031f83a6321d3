-- Mean squared error: sum (x - y)^2, divided by the element count when sizeAverage. The sums
-- are the ops mse_loss / mse_grad of the input's backend (CUDA: backend/cuda/nn.lua).
local loss = require 'nn.util.loss'
local MSECriterion, parent = torch.class('nn.MSECriterion', 'nn.Criterion')
MSECriterion._deviceKernel = true

MSECriterion.__init = loss.initSizeAverage(parent)

loss.define(MSECriterion, {
  loss = 'local z = X - Y; S = S + z * z',
  grad = 'G = 2 * N * (X - Y)',
  op = 'mse',
})
