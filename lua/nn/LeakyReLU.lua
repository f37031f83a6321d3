-- x for x > 0, negval * x otherwise.
local check = require 'torch.check'
local pointwise = require 'nn.kernels.pointwise'
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
})

function LeakyReLU:__tostring__() return ('%s(%g)'):format(torch.type(self), self.negval) end
