-- The mean of each kT x kW x kH window of planes x T x H x W input (or a batch of them).
local pool = require 'nn.util.pool'
local VolumetricAveragePooling, parent = torch.class('nn.VolumetricAveragePooling', 'nn.Module')

function VolumetricAveragePooling:__init(kT, kW, kH, dT, dW, dH)
  parent.__init(self)
  self.kT, self.kW, self.kH = kT, kW, kH
  self.dT, self.dW, self.dH = dT or kT, dW or kW, dH or kH
end

pool.install(VolumetricAveragePooling, 'avg', 3)

function VolumetricAveragePooling:__tostring__()
  return ('%s(%dx%dx%d, %d,%d,%d)'):format(torch.type(self), self.kT, self.kW, self.kH,
    self.dT, self.dW, self.dH)
end
