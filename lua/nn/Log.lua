-- log(x).
local pointwise = require 'nn.util.pointwise'
local Log = torch.class('nn.Log', 'nn.Module')

pointwise.define(Log, {
  forwardOp = function(_, output, input) output:log(input) end,
  backward = '$1 = $3 / $2',
  -- oneDNN's log is off by up to 3.4e-6 near 1 (numpy's is correctly rounded): the gradient only
  eltwise = { backward = 'log' },
  deviceBackward = function(_, gradInput, input, gradOutput) gradInput:cdiv(gradOutput, input) end,
})
