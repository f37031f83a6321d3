-- SpatialConvolution whose kernel taps are dilationW columns and dilationH rows apart.
local shape = require 'nn.util.shape'
local SpatialDilatedConvolution, parent = torch.class('nn.SpatialDilatedConvolution', 'nn.SpatialConvolution')
SpatialDilatedConvolution._deviceKernel = true   -- the parent's CUDA passes take the dilation

function SpatialDilatedConvolution:__init(nInputPlane, nOutputPlane, kW, kH, dW, dH, padW, padH,
                                          dilationW, dilationH)
  parent.__init(self, nInputPlane, nOutputPlane, kW, kH, dW, dH, padW, padH)
  self.dilationW, self.dilationH = dilationW or 1, dilationH or 1
  shape.positive(self, 'dilations', self.dilationW, self.dilationH)
end

function SpatialDilatedConvolution:__tostring__()
  local s = parent.__tostring__(self)
  return s:gsub('%)', (', %d,%d)'):format(self.dilationW, self.dilationH), 1)
end
