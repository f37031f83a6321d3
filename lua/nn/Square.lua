-- x^2.
local pointwise = require 'nn.util.pointwise'
local Square = torch.class('nn.Square', 'nn.Module')

pointwise.define(Square, {
  forward = 'local x = $2; $1 = x * x',
  backward = '$1 = 2 * $2 * $3',
  eltwise = { forward = 'square', backward = 'square' },
  deviceForward = function(_, output, input) output:cmul(input, input) end,
  deviceBackward = function(_, gradInput, input, gradOutput) gradInput:cmul(gradOutput, input):mul(2) end,
})
