-- VolumetricConvolution whose kernel taps are dilationT frames, dilationH rows and dilationW
-- columns apart.
local shape = require 'nn.util.shape'
local VolumetricDilatedConvolution, parent = torch.class('nn.VolumetricDilatedConvolution', 'nn.VolumetricConvolution')

function VolumetricDilatedConvolution:__init(nInputPlane, nOutputPlane, kT, kW, kH, dT, dW, dH,
                                             padT, padW, padH, dilationT, dilationW, dilationH)
  parent.__init(self, nInputPlane, nOutputPlane, kT, kW, kH, dT, dW, dH, padT, padW, padH)
  self.dilationT, self.dilationW, self.dilationH = dilationT or 1, dilationW or 1, dilationH or 1
  shape.positive(self, 'dilations', self.dilationT, self.dilationW, self.dilationH)
end

function VolumetricDilatedConvolution:__tostring__()
  local s = parent.__tostring__(self)
  return (s:gsub('%)', (', %d,%d,%d)'):format(self.dilationT, self.dilationW, self.dilationH), 1))
end
