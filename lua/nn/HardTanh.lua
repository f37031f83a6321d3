-- x clipped to [min_val, max_val]; the gradient passes strictly inside the interval.
local check = require 'torch.core.check'
local pointwise = require 'nn.util.pointwise'
local HardTanh, parent = torch.class('nn.HardTanh', 'nn.Module')

function HardTanh:__init(minValue, maxValue, inplace)
  parent.__init(self)
  self.min_val = check.optNumber(torch.type(self), minValue, 'min_value') or -1
  self.max_val = check.optNumber(torch.type(self), maxValue, 'max_value') or 1
  self.inplace = inplace or false
  if not (self.max_val > self.min_val) then
    check.error(('%s: max_value must be larger than min_value, got min_value %s and max_value %s'):format(
      torch.type(self), self.min_val, self.max_val))
  end
end

pointwise.define(HardTanh, {
  forwardOp = function(_, output, input, lo, hi) output:clamp(input, lo, hi) end,
  backwardOp = function(m, gradInput, input, gradOutput, _, lo, hi)
    gradInput:cmul(gradOutput, pointwise.mask(m, input, lo, hi))
  end,
  params = function(self) return self.min_val, self.max_val end,
  -- oneDNN's clip_v2: min(max(x, lo), hi), and gradOutput where lo < x < hi, else 0 gradOutput
  -- (in place, the output is strictly inside exactly where the input is)
  eltwise = {
    forward = function(_, lo, hi) return 'clip_v2', lo, hi end,
    backward = function(_, lo, hi) return 'clip_v2', lo, hi end,
  },
})

function HardTanh:clearState()
  return parent.clearState(self, '_mask', '_above', '_below')
end
