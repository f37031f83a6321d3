-- y = x where x > threshold, else val.
local pointwise = require 'nn.kernels.pointwise'
local Threshold, parent = torch.class('nn.Threshold', 'nn.Module')

function Threshold:__init(th, v, ip)
  parent.__init(self)
  if (th ~= nil and type(th) ~= 'number') or (v ~= nil and type(v) ~= 'number') then
    error('nn.Threshold(threshold, value)')
  end
  self.threshold = th or 1e-6
  self.val = v or 0
  self.inplace = ip or false
  self:validateParameters()
end

-- In place, backward reads the output as the input: val must not pass the threshold.
function Threshold:validateParameters()
  self.inplace = self.inplace or false
  if self.inplace and self.val > self.threshold then
    error(('in-place processing requires value (%s) not exceed threshold (%s)'):format(
      self.val, self.threshold))
  end
end

pointwise.define(Threshold, {
  forward = '$1 = $2 > v1 and $2 or v2',
  backward = '$1 = $2 > v1 and $3 or 0',
  deviceForward = function(output, input, th, val)
    local below = input:le(th)
    if output ~= input then output:copy(input) end
    output:maskedFill(below, val)
  end,
  deviceBackward = function(gradInput, input, gradOutput, _, th)
    local below = input:le(th)
    if gradInput ~= gradOutput then gradInput:copy(gradOutput) end
    gradInput:maskedFill(below, 0)
  end,
  params = function(self)
    self:validateParameters()
    return self.threshold, self.val
  end,
})
