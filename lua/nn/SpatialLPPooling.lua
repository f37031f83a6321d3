-- The p-norm of each kW x kH window of every plane: (sum of x^p)^(1/p), built as a Sequential
-- of x^p (Square for p = 2), average pooling scaled back to sums, and the 1/p power (Sqrt for
-- p = 2). It has no parameters: the parameter methods do nothing.
local check = require 'torch.core.check'
local SpatialLPPooling, parent = torch.class('nn.SpatialLPPooling', 'nn.Sequential')

function SpatialLPPooling:__init(nInputPlane, pnorm, kW, kH, dW, dH)
  parent.__init(self)
  local op = 'nn.SpatialLPPooling'
  check.int(op, nInputPlane, 'nInputPlane', 1)
  check.number(op, pnorm, 'pnorm')
  self.kW, self.kH = check.int(op, kW, 'kW', 1), check.int(op, kH, 'kH', 1)
  self.dW = check.optInt(op, dW, 'dW', 1) or kW
  self.dH = check.optInt(op, dH, 'dH', 1) or kH
  self:add(pnorm == 2 and nn.Square() or nn.Power(pnorm))
  self:add(nn.SpatialAveragePooling(kW, kH, self.dW, self.dH))
  self:add(nn.MulConstant(kW * kH))
  self:add(pnorm == 2 and nn.Sqrt() or nn.Power(1 / pnorm))
end

for _, name in ipairs { 'reset', 'accGradParameters', 'accUpdateGradParameters', 'zeroGradParameters',
                        'updateParameters' } do
  SpatialLPPooling[name] = function() end
end
