-- The p-norm of each kW x kH window of every plane: (sum of x^p)^(1/p), built as a Sequential
-- of x^p (Square for p = 2), average pooling scaled back to sums, and the 1/p power (Sqrt for
-- p = 2). It has no parameters: the parameter methods do nothing.
local SpatialLPPooling, parent = torch.class('nn.SpatialLPPooling', 'nn.Sequential')

function SpatialLPPooling:__init(nInputPlane, pnorm, kW, kH, dW, dH)
  parent.__init(self)
  self.kW, self.kH = kW, kH
  self.dW, self.dH = dW or kW, dH or kH
  self:add(pnorm == 2 and nn.Square() or nn.Power(pnorm))
  self:add(nn.SpatialAveragePooling(kW, kH, self.dW, self.dH))
  self:add(nn.MulConstant(kW * kH))
  self:add(pnorm == 2 and nn.Sqrt() or nn.Power(1 / pnorm))
end

for _, name in ipairs { 'reset', 'accGradParameters', 'accUpdateGradParameters', 'zeroGradParameters',
                        'updateParameters' } do
  SpatialLPPooling[name] = function() end
end
