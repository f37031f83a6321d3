-- inn.SpatialAveragePooling: nn.SpatialAveragePooling always in ceil mode (Caffe's output size).
require 'inn.env'
local SpatialAveragePooling, parent = torch.class('inn.SpatialAveragePooling', 'nn.SpatialAveragePooling')

function SpatialAveragePooling:__init(...)
  parent.__init(self, ...)
  self:ceil()
end

function SpatialAveragePooling:updateOutput(input)
  self.ceil_mode = true
  return parent.updateOutput(self, input)
end
