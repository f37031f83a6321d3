-- SpatialMaxPooling whose windows take every dilationW-th column and dilationH-th row.
local SpatialDilatedMaxPooling, parent = torch.class('nn.SpatialDilatedMaxPooling', 'nn.SpatialMaxPooling')
SpatialDilatedMaxPooling._deviceKernel = true   -- the parent's CUDA passes take the dilation

function SpatialDilatedMaxPooling:__init(kW, kH, dW, dH, padW, padH, dilationW, dilationH)
  parent.__init(self, kW, kH, dW, dH, padW, padH)
  self.dilationW, self.dilationH = dilationW or 1, dilationH or 1
end

function SpatialDilatedMaxPooling:__tostring__()
  return ('%s(%dx%d, %d,%d, %d,%d, %d,%d)'):format(torch.type(self), self.kW, self.kH, self.dW,
    self.dH, self.padW, self.padH, self.dilationW, self.dilationH)
end
