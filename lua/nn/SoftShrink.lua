-- x - lambda above lambda, x + lambda below -lambda, 0 between.
local check = require 'torch.core.check'
local pointwise = require 'nn.util.pointwise'
local SoftShrink, parent = torch.class('nn.SoftShrink', 'nn.Module')

function SoftShrink:__init(lam)
  parent.__init(self)
  self.lambda = check.optNumber('nn.SoftShrink', lam, 'lambda') or 0.5
end

pointwise.define(SoftShrink, {
  forward = 'local x = $2; $1 = x > v1 and x - v1 or (x < -v1 and x + v1 or 0)',
  backward = 'local x = $2; $1 = (x > v1 or x < -v1) and $3 or 0',
  params = function(self) return self.lambda end,
  -- x - clamp(x, -lambda, lambda); the gradient passes where |x| > lambda
  deviceForward = function(m, output, input, lambda)
    local inside = pointwise.scratch(m, '_slope', input):clamp(input, -lambda, lambda)
    output:add(input, -1, inside)
  end,
  deviceBackward = function(m, gradInput, input, gradOutput, _, lambda)
    local magnitude = pointwise.scratch(m, '_slope', input):abs(input)
    gradInput:cmul(gradOutput, pointwise.mask(m, magnitude, lambda))
  end,
})
