-- x^pow.
local check = require 'torch.core.check'
local pointwise = require 'nn.util.pointwise'
local Power, parent = torch.class('nn.Power', 'nn.Module')

function Power:__init(p)
  parent.__init(self)
  self.pow = check.number('nn.Power', p, 'power')
end

pointwise.define(Power, {
  forwardOp = function(_, output, input, p) output:pow(input, p) end,
  backward = '$1 = $3 * v1 * math.pow($2, v1 - 1)',
  params = function(self) return self.pow end,
  deviceBackward = function(m, gradInput, input, gradOutput, _, p)
    gradInput:cmul(gradOutput, pointwise.scratch(m, '_slope', input):pow(input, p - 1):mul(p))
  end,
})
