-- x where |x| > lambda, else 0.
local check = require 'torch.core.check'
local pointwise = require 'nn.util.pointwise'
local HardShrink, parent = torch.class('nn.HardShrink', 'nn.Module')

function HardShrink:__init(lam)
  parent.__init(self)
  self.lambda = check.optNumber('nn.HardShrink', lam, 'lambda') or 0.5
end

-- 1 where |x| > lambda, else 0 (device tensors)
local function outside(m, x, lambda)
  return pointwise.mask(m, pointwise.scratch(m, '_slope', x):abs(x), lambda)
end

pointwise.define(HardShrink, {
  forward = 'local x = $2; $1 = (x > v1 or x < -v1) and x or 0',
  backward = 'local x = $2; $1 = (x > v1 or x < -v1) and $3 or 0',
  params = function(self) return self.lambda end,
  -- x and gradOutput where |x| > lambda, else 0
  deviceForward = function(m, output, input, lambda) output:cmul(input, outside(m, input, lambda)) end,
  deviceBackward = function(m, gradInput, input, gradOutput, _, lambda)
    gradInput:cmul(gradOutput, outside(m, input, lambda))
  end,
})
