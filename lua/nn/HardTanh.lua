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
  deviceForward = function(output, input, lo, hi) output:clamp(input, lo, hi) end,
  deviceBackward = function(gradInput, input, gradOutput, _, lo, hi)
    local outside = input:le(lo):add(input:ge(hi))
    if gradInput ~= gradOutput then gradInput:copy(gradOutput) end
    gradInput:maskedFill(outside, 0)
  end,
  params = function(self) return self.min_val, self.max_val end,
})
