-- The transpose of VolumetricConvolution: SpatialFullConvolution's passes over T x H x W
-- volumes. Weight nInputPlane x nOutputPlane x kT x kH x kW; output size (T-1)*dT - 2*padT +
-- kT + adjT (likewise H, W); the input may be {input, target} as for SpatialFullConvolution.
local shape = require 'nn.util.shape'
local VolumetricFullConvolution, parent = torch.class('nn.VolumetricFullConvolution', 'nn.Module')

function VolumetricFullConvolution:__init(nInputPlane, nOutputPlane, kT, kW, kH, dT, dW, dH,
                                          padT, padW, padH, adjT, adjW, adjH)
  parent.__init(self)
  self.nInputPlane, self.nOutputPlane = nInputPlane, nOutputPlane
  self.kT, self.kW, self.kH = kT, kW, kH
  self.dT, self.dW, self.dH = dT or 1, dW or 1, dH or 1
  self.padT, self.padW, self.padH = padT or 0, padW or 0, padH or 0
  self.adjT, self.adjW, self.adjH = adjT or 0, adjW or 0, adjH or 0
  shape.positive(self, 'plane counts, kernel sizes and strides', nInputPlane, nOutputPlane,
    kT, kW, kH, self.dT, self.dW, self.dH)
  shape.nonNegative(self, 'paddings and adjustments', self.padT, self.padW, self.padH, self.adjT, self.adjW, self.adjH)
  if self.adjT >= self.dT or self.adjW >= self.dW or self.adjH >= self.dH then
    shape.fail(self, 'adjT, adjW and adjH must be smaller than dT, dW and dH, got adj %d,%d,%d for stride %d,%d,%d',
      self.adjT, self.adjW, self.adjH, self.dT, self.dW, self.dH)
  end
  self.weight = torch.Tensor(nInputPlane, nOutputPlane, kT, kH, kW)
  self.gradWeight = torch.Tensor(nInputPlane, nOutputPlane, kT, kH, kW)
  self.bias = torch.Tensor(nOutputPlane)
  self.gradBias = torch.Tensor(nOutputPlane)
  self:reset()
end

VolumetricFullConvolution._dims = { 'T', 'H', 'W' }

function VolumetricFullConvolution:reset(stdv)
  stdv = stdv and stdv * math.sqrt(3) or 1 / math.sqrt(self.kT * self.kW * self.kH * self.nInputPlane)
  self.weight:uniform(-stdv, stdv)
  if self.bias then self.bias:uniform(-stdv, stdv) end
end

for _, name in ipairs { 'noBias', '_geometry', 'updateOutput', 'updateGradInput',
                        'accGradParameters', 'type', 'clearState' } do
  VolumetricFullConvolution[name] = nn.SpatialFullConvolution[name]
end

function VolumetricFullConvolution:__tostring__()
  local s = ('%s(%d -> %d, %dx%dx%d'):format(torch.type(self), self.nInputPlane, self.nOutputPlane,
    self.kT, self.kW, self.kH)
  s = s .. (', %d,%d,%d, %d,%d,%d'):format(self.dT, self.dW, self.dH, self.padT, self.padW, self.padH)
  if self.adjT ~= 0 or self.adjW ~= 0 or self.adjH ~= 0 then
    s = s .. (', %d,%d,%d'):format(self.adjT, self.adjW, self.adjH)
  end
  return s .. (self.bias and ')' or ') without bias')
end
