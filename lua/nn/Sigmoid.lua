-- 1 / (1 + exp(-x)).
local pointwise = require 'nn.util.pointwise'
local Sigmoid = torch.class('nn.Sigmoid', 'nn.Module')

pointwise.define(Sigmoid, {
  forwardOp = function(_, output, input) output:sigmoid(input) end,
  backward = 'local y = $4; $1 = $3 * (1 - y) * y',
  op = 'sigmoid',
  eltwise = { forward = 'logistic', backward = 'logistic_dst' },
})
