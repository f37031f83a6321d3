-- Subtracts from every plane the local weighted mean over all planes:
-- y = x - L(x) / L(ones), L the sum over planes and a kernel window (nn/util/localnorm.lua);
-- the default kernel is 9x9 ones.
local localnorm = require 'nn.util.localnorm'
local shape = require 'nn.util.shape'
local SpatialSubtractiveNormalization, parent = torch.class('nn.SpatialSubtractiveNormalization', 'nn.Module')

function SpatialSubtractiveNormalization:__init(nInputPlane, kernel)
  parent.__init(self)
  self.nInputPlane = nInputPlane or 1
  self.kernel = kernel or torch.Tensor(9, 9):fill(1)
  self.estimator = localnorm.estimator(self, self.nInputPlane, self.kernel)
end

function SpatialSubtractiveNormalization:updateOutput(input)
  shape.input(self, input, 2, self.nInputPlane)
  local coef = localnorm.coef(self, input)
  local sums = self.estimator:updateOutput(input)
  self._means = self._means or input.new()
  self._means:resizeAs(sums):cdiv(sums, coef)
  self.output:resizeAs(input):copy(input):add(-1, self._means:expandAs(input))
  return self.output
end

-- gradInput = g - L^T(sum over planes of g / coef)
function SpatialSubtractiveNormalization:updateGradInput(input, gradOutput)
  shape.input(self, input, 2, self.nInputPlane)
  shape.gradOutput(self, gradOutput, input:size():totable())
  local coef = localnorm.coef(self, input)
  self._gmeans = self._gmeans or input.new()
  self._gmeans:sum(gradOutput, localnorm.planeDim(input)):cdiv(coef)
  local back = self.estimator:updateGradInput(input, self._gmeans)
  self.gradInput:resizeAs(input):copy(gradOutput):add(-1, back)
  return self.gradInput
end

function SpatialSubtractiveNormalization:clearState()
  self._coef, self._onesSize = nil, nil
  self.estimator:clearState()
  return parent.clearState(self, '_means', '_gmeans')
end
