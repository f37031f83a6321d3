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
  params = function(self)
    self:validateParameters()
    return self.threshold, self.val
  end,
})

function Threshold:__tostring__()
  return ('%s (%s, %s)'):format(torch.type(self), self.threshold, self.val)
end
