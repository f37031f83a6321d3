-- x for x > 0, negval * x otherwise.
local check = require 'torch.core.check'
local pointwise = require 'nn.util.pointwise'
local LeakyReLU, parent = torch.class('nn.LeakyReLU', 'nn.Module')

function LeakyReLU:__init(negval, ip)
  parent.__init(self)
  if type(negval) == 'boolean' then negval, ip = nil, negval end
  self.negval = check.optNumber('nn.LeakyReLU', negval, 'negval') or 1 / 100
  self.inplace = ip or false
  if self.negval < 0 then self.inplace = false end  -- in place, the sign of x must survive
end

pointwise.define(LeakyReLU, {
  forward = 'local x = $2; $1 = x > 0 and x or x * v1',
  backward = '$1 = $2 > 0 and $3 or $3 * v1',
  params = function(self) return self.negval end,
  -- oneDNN's relu with slope negval: x > 0 ? x : negval x; gradOutput where x > 0, else
  -- negval gradOutput (in place, negval >= 0 and the output has the input's sign)
  eltwise = {
    forward = function(_, negval) return 'relu', negval end,
    backward = function(_, negval) return 'relu', negval end,
  },
  -- max(x, 0) + negval * min(x, 0); the slope 1 where x > 0, else negval
  deviceForward = function(m, output, input, negval)
    local below = torch.cmin(pointwise.scratch(m, '_part', input), input, 0)
    output:cmax(input, 0):add(negval, below)
  end,
  deviceBackward = function(m, gradInput, input, gradOutput, _, negval)
    gradInput:cmul(gradOutput, pointwise.mask(m, input, 0):mul(1 - negval):add(negval))
  end,
})

function LeakyReLU:__tostring__() return ('%s(%g)'):format(torch.type(self), self.negval) end
