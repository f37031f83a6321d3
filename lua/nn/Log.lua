-- log(x).
local pointwise = require 'nn.util.pointwise'
local Log = torch.class('nn.Log', 'nn.Module')

pointwise.define(Log, {
  forwardOp = function(_, output, input) output:log(input) end,
  backward = '$1 = $3 / $2',
  deviceBackward = function(_, gradInput, input, gradOutput) gradInput:cdiv(gradOutput, input) end,
})
