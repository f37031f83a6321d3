-- The local weighted sums behind SpatialSubtractive/DivisiveNormalization: L(x), the sum over
-- planes and a kernel window of x, zero-padded to keep the plane size, with the kernel (2D, or
-- the outer product of a 1D one with itself) scaled to a total of 1 over all planes; and coef
-- = L(ones), which corrects the borders (where the window leaves the image).
local check = require 'torch.core.check'
local shape = require 'nn.util.shape'

local localnorm = {}

-- An nInputPlane -> 1 SpatialConvolution computing L.
function localnorm.estimator(self, nInputPlane, kernel)
  check.int(torch.type(self), nInputPlane, 'nInputPlane', 1)
  if not torch.isTensor(kernel) or (kernel:dim() ~= 1 and kernel:dim() ~= 2) then
    shape.fail(self, 'the averaging kernel must be a 1D or 2D tensor, got %s',
      torch.isTensor(kernel) and (kernel:dim() .. 'D') or torch.type(kernel))
  end
  if kernel:size(1) % 2 == 0 or (kernel:dim() == 2 and kernel:size(2) % 2 == 0) then
    shape.fail(self, 'the averaging kernel must have odd sizes, got %s',
      table.concat(kernel:size():totable(), 'x'))
  end
  local k = kernel:dim() == 2 and kernel:clone() or torch.ger(kernel, kernel)
  local kH, kW = k:size(1), k:size(2)
  local conv = nn.SpatialConvolution(nInputPlane, 1, kW, kH, 1, 1, math.floor(kW / 2), math.floor(kH / 2))
  conv:noBias()
  conv.weight:copy(k:div(k:sum() * nInputPlane):view(1, 1, kH, kW):expand(1, nInputPlane, kH, kW))
  return conv
end

-- coef for input's planes, the size of L(input) (a batch shares one image's), kept while
-- the input size stays.
function localnorm.coef(self, input)
  local batch = input:dim() == 4
  local one = batch and input[1] or input
  if not self._coef or not self._onesSize or not one:isSize(self._onesSize) then
    self._onesSize = one:size()
    local est = self.estimator:clone()
    self._coef = est:updateOutput(one.new():resizeAs(one):fill(1)):clone()
  end
  if batch then
    return self._coef:view(1, 1, one:size(2), one:size(3)):expand(input:size(1), 1, one:size(2), one:size(3))
  end
  return self._coef
end

-- the plane-summing dim of input (1 for planes x H x W, 2 for a batch)
function localnorm.planeDim(input) return input:dim() == 4 and 2 or 1 end

return localnorm
