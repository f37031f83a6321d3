-- Divides every plane by the local weighted standard deviation over all planes:
-- s = sqrt(L(x^2)) / L(ones) (L: nn/util/localnorm.lua), y = x / s, where s <= threshold
-- becomes thresval (both 1e-4 by default); the default kernel is 9x9 ones.
local check = require 'torch.core.check'
local localnorm = require 'nn.util.localnorm'
local shape = require 'nn.util.shape'
local SpatialDivisiveNormalization, parent = torch.class('nn.SpatialDivisiveNormalization', 'nn.Module')

function SpatialDivisiveNormalization:__init(nInputPlane, kernel, threshold, thresval)
  parent.__init(self)
  self.nInputPlane = nInputPlane or 1
  self.kernel = kernel or torch.Tensor(9, 9):fill(1)
  self.threshold = check.optNumber(torch.type(self), threshold, 'threshold') or 1e-4
  self.thresval = check.optNumber(torch.type(self), thresval, 'thresval') or self.threshold
  self.estimator = localnorm.estimator(self, self.nInputPlane, self.kernel)
end

function SpatialDivisiveNormalization:updateOutput(input)
  shape.input(self, input, 2, self.nInputPlane)
  local coef = localnorm.coef(self, input)
  self._squares = (self._squares or input.new()):resizeAs(input):cmul(input, input)
  self._stds = (self._stds or input.new()):sqrt(self.estimator:updateOutput(self._squares))
  self._adjusted = (self._adjusted or input.new()):resizeAs(self._stds):cdiv(self._stds, coef)
  if torch.type(self._below) ~= 'torch.ByteTensor' then self._below = torch.ByteTensor() end   -- :type() converts it
  self._below:le(self._adjusted, self.threshold)
  self._divisors = (self._divisors or input.new()):resizeAs(self._adjusted):copy(self._adjusted)
  self._divisors:maskedFill(self._below, self.thresval)
  self.output:resizeAs(input):cdiv(input, self._divisors:expandAs(input))
  return self.output
end

-- gradInput = g / d + x * L^T(q), q = -(sum over planes of g x) / d^2 / (coef s') where d is
-- not thresholded (s' = sqrt(L(x^2))), 0 where it is
function SpatialDivisiveNormalization:updateGradInput(input, gradOutput)
  shape.input(self, input, 2, self.nInputPlane)
  shape.gradOutput(self, gradOutput, input:size():totable())
  local coef = localnorm.coef(self, input)
  local d = self._divisors
  self._gx = (self._gx or input.new()):resizeAs(input):cmul(gradOutput, input)
  local q = (self._q or input.new()):sum(self._gx, localnorm.planeDim(input))
  self._q = q
  q:cdiv(d):cdiv(d):cdiv(coef):cdiv(self._stds):mul(-1):maskedFill(self._below, 0)
  local back = self.estimator:updateGradInput(self._squares, q)
  self.gradInput:resizeAs(input):cdiv(gradOutput, d:expandAs(input)):addcmul(input, back)
  return self.gradInput
end

function SpatialDivisiveNormalization:clearState()
  self._coef, self._onesSize = nil, nil
  self.estimator:clearState()
  return parent.clearState(self, '_squares', '_stds', '_adjusted', '_below', '_divisors', '_gx', '_q')
end
