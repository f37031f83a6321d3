-- exp(x).
local pointwise = require 'nn.util.pointwise'
local Exp = torch.class('nn.Exp', 'nn.Module')

pointwise.define(Exp, {
  forwardOp = function(_, output, input) output:exp(input) end,
  backward = '$1 = $3 * $4',
  -- oneDNN's exp turns NaN into inf: the gradient (gradOutput y) only
  eltwise = { backward = 'exp_dst' },
  deviceBackward = function(_, gradInput, _, gradOutput, output) gradInput:cmul(gradOutput, output) end,
})
