-- Max pooling to a fixed W x H output whatever the input size: output (y, x) takes the
-- maximum of rows [floor(y*iH/H), ceil((y+1)*iH/H)) and the like columns. Indices are 1-based
-- offsets in the input plane (torch7 keeps a row and a column index instead).
local pool = require 'nn.util.pool'
local SpatialAdaptiveMaxPooling, parent = torch.class('nn.SpatialAdaptiveMaxPooling', 'nn.Module')
SpatialAdaptiveMaxPooling._deviceKernel = true   -- pool.adaptive*'s device path

function SpatialAdaptiveMaxPooling:__init(W, H)
  parent.__init(self)
  self.W, self.H = W, H
  self.indices = torch.LongTensor()
end

function SpatialAdaptiveMaxPooling:updateOutput(input) return pool.adaptiveForward(self, input, 'max') end

function SpatialAdaptiveMaxPooling:updateGradInput(input, gradOutput)
  return pool.adaptiveBackward(self, input, gradOutput, 'max')
end

function SpatialAdaptiveMaxPooling:clearState() return parent.clearState(self, 'indices') end
