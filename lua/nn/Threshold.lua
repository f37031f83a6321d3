-- y = x where x > threshold, else val.
local check = require 'torch.core.check'
local backend = require 'torch.backend'
local pointwise = require 'nn.util.pointwise'
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

-- The passes are ops of the input's backend (threshold, threshold_backward: backend/cpu/nn.lua,
-- backend/cuda/nn.lua).
pointwise.define(Threshold, {
  forwardOp = function(_, output, input, th, val) backend.of(input).threshold(output, input, th, val) end,
  backwardOp = function(_, gradInput, input, gradOutput, _, th)
    backend.of(input).threshold_backward(gradInput, input, gradOutput, th)
  end,
  -- oneDNN's relu where the module is a ReLU (x > 0 ? x : 0; the gradient gradOutput where
  -- x > 0, else 0 gradOutput); the backward pass for any val at threshold 0
  eltwise = {
    forward = function(_, th, val) if th == 0 and val == 0 then return 'relu' end end,
    backward = function(_, th) if th == 0 then return 'relu' end end,
  },
  params = function(self)
    self:validateParameters()
    return self.threshold, self.val
  end,
})
