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
  forwardOp = function(_, output, input, lo, hi) output:clamp(input, lo, hi) end,
  backwardOp = function(m, gradInput, input, gradOutput, _, lo, hi)
    gradInput:cmul(gradOutput, pointwise.mask(m, input, lo, hi))
  end,
  params = function(self) return self.min_val, self.max_val end,
})

function HardTanh:clearState()
  return parent.clearState(self, '_mask', '_above', '_below')
end
