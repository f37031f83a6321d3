-- x clipped to [min_val, max_val]; the gradient passes strictly inside the interval.
local pointwise = require 'nn.kernels.pointwise'
local HardTanh, parent = torch.class('nn.HardTanh', 'nn.Module')

function HardTanh:__init(minValue, maxValue, inplace)
  parent.__init(self)
  self.min_val = minValue or -1
  self.max_val = maxValue or 1
  self.inplace = inplace or false
  if self.max_val <= self.min_val then error('max_value must be larger than min_value') end
end

pointwise.define(HardTanh, {
  forward = 'local x = $2; $1 = x < v1 and v1 or (x > v2 and v2 or x)',
  backward = 'local x = $2; $1 = (x > v1 and x < v2) and $3 or 0',
  params = function(self) return self.min_val, self.max_val end,
})

function HardTanh:__tostring__()
  return ('%s (%s, %s)'):format(torch.type(self), self.min_val, self.max_val)
end
