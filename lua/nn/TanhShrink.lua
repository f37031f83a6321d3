-- x - tanh(x).
local pointwise = require 'nn.util.pointwise'
local TanhShrink = torch.class('nn.TanhShrink', 'nn.Module')

pointwise.define(TanhShrink, {
  forward = 'local x = $2; $1 = x - math.tanh(x)',
  backward = 'local t = math.tanh($2); $1 = $3 * t * t',
  deviceForward = function(m, output, input)
    output:add(input, -1, pointwise.scratch(m, '_slope', input):tanh(input))
  end,
  deviceBackward = function(m, gradInput, input, gradOutput)
    gradInput:cmul(gradOutput, pointwise.scratch(m, '_slope', input):tanh(input):pow(2))
  end,
})
