-- VolumetricMaxPooling whose windows take every dilationT-th frame, dilationH-th row and
-- dilationW-th column.
local VolumetricDilatedMaxPooling, parent = torch.class('nn.VolumetricDilatedMaxPooling', 'nn.VolumetricMaxPooling')

function VolumetricDilatedMaxPooling:__init(kT, kW, kH, dT, dW, dH, padT, padW, padH, dilationT, dilationW, dilationH)
  parent.__init(self, kT, kW, kH, dT, dW, dH, padT, padW, padH)
  self.dilationT, self.dilationW, self.dilationH = dilationT or 1, dilationW or 1, dilationH or 1
end

function VolumetricDilatedMaxPooling:__tostring__()
  return ('%s(%dx%dx%d, %d,%d,%d, %d,%d,%d, %d,%d,%d)'):format(torch.type(self), self.kT, self.kW,
    self.kH, self.dT, self.dW, self.dH, self.padT, self.padW, self.padH, self.dilationT,
    self.dilationW, self.dilationH)
end
