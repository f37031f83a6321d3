-- x / (1 + |x|).
local pointwise = require 'nn.util.pointwise'
local SoftSign = torch.class('nn.SoftSign', 'nn.Module')

pointwise.define(SoftSign, {
  forward = 'local x = $2; $1 = x / (1 + math.abs(x))',
  backward = 'local d = 1 + math.abs($2); $1 = $3 / (d * d)',
  deviceForward = function(m, output, input)
    output:cdiv(input, pointwise.scratch(m, '_slope', input):abs(input):add(1))
  end,
  deviceBackward = function(m, gradInput, input, gradOutput)
    gradInput:cdiv(gradOutput, pointwise.scratch(m, '_slope', input):abs(input):add(1):pow(2))
  end,
})
