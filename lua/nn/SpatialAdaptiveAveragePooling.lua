-- Average pooling to a fixed W x H output whatever the input size: output (y, x) averages
-- rows [floor(y*iH/H), ceil((y+1)*iH/H)) and the like columns.
local pool = require 'nn.util.pool'
local SpatialAdaptiveAveragePooling, parent = torch.class('nn.SpatialAdaptiveAveragePooling', 'nn.Module')
SpatialAdaptiveAveragePooling._deviceKernel = true   -- pool.adaptive*'s device path

function SpatialAdaptiveAveragePooling:__init(W, H)
  parent.__init(self)
  self.W, self.H = W, H
end

function SpatialAdaptiveAveragePooling:updateOutput(input) return pool.adaptiveForward(self, input, 'avg') end

function SpatialAdaptiveAveragePooling:updateGradInput(input, gradOutput)
  return pool.adaptiveBackward(self, input, gradOutput, 'avg')
end
