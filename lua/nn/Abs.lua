-- |x|; the gradient at 0 is 0.
local pointwise = require 'nn.util.pointwise'
local Abs = torch.class('nn.Abs', 'nn.Module')

pointwise.define(Abs, {
  forwardOp = function(_, output, input) output:abs(input) end,
  backward = 'local x = $2; $1 = x > 0 and $3 or (x < 0 and -$3 or 0)',
  eltwise = { forward = 'abs', backward = 'abs' },
  deviceBackward = function(m, gradInput, input, gradOutput)
    gradInput:cmul(gradOutput, pointwise.scratch(m, '_slope', input):sign(input))
  end,
})
