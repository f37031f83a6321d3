-- 3D convolution over planes x T x H x W input (or a batch of them), with a weight of
-- nOutputPlane x nInputPlane x kT x kH x kW: SpatialConvolution's unfold + GEMM passes on
-- volumes.
local shape = require 'nn.util.shape'
local VolumetricConvolution, parent = torch.class('nn.VolumetricConvolution', 'nn.Module')

function VolumetricConvolution:__init(nInputPlane, nOutputPlane, kT, kW, kH, dT, dW, dH, padT, padW, padH)
  parent.__init(self)
  self.nInputPlane, self.nOutputPlane = nInputPlane, nOutputPlane
  self.kT, self.kW, self.kH = kT, kW, kH
  self.dT, self.dW, self.dH = dT or 1, dW or 1, dH or 1
  self.padT = padT or 0
  self.padW = padW or self.padT
  self.padH = padH or self.padW
  shape.positive(self, 'plane counts, kernel sizes and strides', nInputPlane, nOutputPlane,
    kT, kW, kH, self.dT, self.dW, self.dH)
  shape.nonNegative(self, 'paddings', self.padT, self.padW, self.padH)
  self.weight = torch.Tensor(nOutputPlane, nInputPlane, kT, kH, kW)
  self.bias = torch.Tensor(nOutputPlane)
  self.gradWeight = torch.Tensor(nOutputPlane, nInputPlane, kT, kH, kW)
  self.gradBias = torch.Tensor(nOutputPlane)
  self:reset()
end

function VolumetricConvolution:reset(stdv)
  stdv = stdv and stdv * math.sqrt(3) or 1 / math.sqrt(self.kT * self.kW * self.kH * self.nInputPlane)
  self.weight:uniform(-stdv, stdv)
  if self.bias then self.bias:uniform(-stdv, stdv) end
end

function VolumetricConvolution:_geometry(input)
  local batch, B, C, s = shape.input(self, input, 3, self.nInputPlane)
  local T, H, W = s[1], s[2], s[3]
  local lT, lH, lW = self.dilationT or 1, self.dilationH or 1, self.dilationW or 1
  local oT = math.floor((T + 2 * self.padT - (lT * (self.kT - 1) + 1)) / self.dT) + 1
  local oH = math.floor((H + 2 * self.padH - (lH * (self.kH - 1) + 1)) / self.dH) + 1
  local oW = math.floor((W + 2 * self.padW - (lW * (self.kW - 1) + 1)) / self.dW) + 1
  shape.output(self, input, { oT, oH, oW }, ('kernel %dx%dx%d, stride %d,%d,%d, padding %d,%d,%d%s'):format(
    self.kT, self.kH, self.kW, self.dT, self.dH, self.dW, self.padT, self.padH, self.padW,
    self.dilationT and (', dilation %d,%d,%d'):format(lT, lH, lW) or ''))
  local nOut = self.nOutputPlane
  return { batch = batch, B = B, C = C, T = T, H = H, W = W, kT = self.kT, kH = self.kH,
    kW = self.kW, dT = self.dT, dH = self.dH, dW = self.dW, padT = self.padT, padH = self.padH,
    padW = self.padW, oT = oT, oH = oH, oW = oW, dilationT = lT, dilationH = lH, dilationW = lW,
    K = C * self.kT * self.kH * self.kW, N = oT * oH * oW,
    sizes = batch and { B, nOut, oT, oH, oW } or { nOut, oT, oH, oW } }
end

for _, name in ipairs { 'noBias', 'updateOutput', 'updateGradInput', 'accGradParameters', 'type',
                        'clearState' } do
  VolumetricConvolution[name] = nn.SpatialConvolution[name]
end

function VolumetricConvolution:__tostring__()
  local s = ('%s(%d -> %d, %dx%dx%d'):format(torch.type(self), self.nInputPlane, self.nOutputPlane,
    self.kT, self.kW, self.kH)
  if self.dT ~= 1 or self.dW ~= 1 or self.dH ~= 1 or self.padT ~= 0 or self.padW ~= 0 or self.padH ~= 0 then
    s = s .. (', %d,%d,%d'):format(self.dT, self.dW, self.dH)
  end
  if self.padT ~= 0 or self.padW ~= 0 or self.padH ~= 0 then
    s = s .. (', %d,%d,%d'):format(self.padT, self.padW, self.padH)
  end
  return s .. (self.bias and ')' or ') without bias')
end
