-- log(1 + exp(beta * x)) / beta; linear (x) where beta * x exceeds threshold.
local check = require 'torch.check'
local pointwise = require 'nn.kernels.pointwise'
local SoftPlus, parent = torch.class('nn.SoftPlus', 'nn.Module')

function SoftPlus:__init(beta, threshold)
  parent.__init(self)
  self.beta = check.optNumber('nn.SoftPlus', beta, 'beta') or 1
  self.threshold = check.optNumber('nn.SoftPlus', threshold, 'threshold') or 20
end

-- Backward from the output: dy/dx = 1 - exp(-beta * y).
pointwise.define(SoftPlus, {
  forward = 'local x = $2; $1 = x * v1 > v2 and x or math.log(1 + math.exp(x * v1)) / v1',
  backward = 'local by = $4 * v1; $1 = by > v2 and $3 or $3 * (1 - math.exp(-by))',
  params = function(self) return self.beta, self.threshold end,
})
