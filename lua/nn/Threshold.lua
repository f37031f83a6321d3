-- y = x where x > threshold, else val.
local check = require 'torch.check'
local apply = require 'torch.backend.cpu.apply'
local pointwise = require 'nn.kernels.pointwise'
local Threshold, parent = torch.class('nn.Threshold', 'nn.Module')

function Threshold:__init(th, v, ip)
  parent.__init(self)
  self.threshold = check.optNumber(torch.type(self), th, 'threshold') or 1e-6
  self.val = check.optNumber(torch.type(self), v, 'value') or 0
  self.inplace = ip or false
  self:validateParameters()
end

-- In place, backward reads the output as the input: val must not pass the threshold.
function Threshold:validateParameters()
  self.inplace = self.inplace or false
  if self.inplace and self.val > self.threshold then
    check.error(('%s: in-place processing requires value (%s) not exceed threshold (%s)'):format(
      torch.type(self), self.val, self.threshold))
  end
end

-- max(x, threshold) when val == threshold (ReLU): one vectorized pass (on the bits when both
-- are 0). Otherwise a CPU loop, or on a device x * mask + val * (1 - mask).
local keepAbove = apply.kernel(2, '$1 = $2 > v1 and $2 or v2')

pointwise.define(Threshold, {
  forwardOp = function(m, output, input, th, val)
    if val == th then
      if th ~= 0 or not pointwise.rectify(m, output, input) then output:cmax(input, th) end
    elseif not input._device then
      keepAbove(output, input, th, val)
    else
      local mask = pointwise.mask(m, input, th)
      output:cmul(input, mask)
      output:add(mask:mul(-val):add(val))
    end
  end,
  backwardOp = function(m, gradInput, input, gradOutput, _, th)
    if th == 0 and pointwise.rectifyBackward(m, gradInput, input, gradOutput) then return end
    gradInput:cmul(gradOutput, pointwise.mask(m, input, th))
  end,
  params = function(self)
    self:validateParameters()
    return self.threshold, self.val
  end,
})

function Threshold:clearState()
  return parent.clearState(self, '_mask', '_above', '_below', '_bits', '_zeros')
end
