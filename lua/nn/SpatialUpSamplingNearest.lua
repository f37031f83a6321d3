-- Nearest-neighbour upsampling of the last two dims by an integer scale_factor.
local resample = require 'nn.util.resample'
local shape = require 'nn.util.shape'
local SpatialUpSamplingNearest, parent = torch.class('nn.SpatialUpSamplingNearest', 'nn.Module')
SpatialUpSamplingNearest._deviceKernel = true   -- resample.run's device path

function SpatialUpSamplingNearest:__init(scale)
  parent.__init(self)
  shape.positive(self, 'scale_factor', scale)
  self.scale_factor = scale
end

-- the input's planes, sizes, and the output sizes
function SpatialUpSamplingNearest:_geometry(input)
  local batch, B, C, s = shape.input(self, input, 2)
  local oH, oW = self:_outputSize(s[1], s[2])
  return B * C, s[1], s[2], oH, oW, batch and { B, C, oH, oW } or { C, oH, oW }
end

function SpatialUpSamplingNearest:_outputSize(H, W) return H * self.scale_factor, W * self.scale_factor end
SpatialUpSamplingNearest._mode = 'nearest'

function SpatialUpSamplingNearest:updateOutput(input)
  local P, H, W, oH, oW, sizes = self:_geometry(input)
  self.output:resize(sizes)
  resample.run(self._mode, input:contiguous(), self.output, P, H, W, oH, oW, self.scale_factor, false)
  return self.output
end

function SpatialUpSamplingNearest:updateGradInput(input, gradOutput)
  local P, H, W, oH, oW, sizes = self:_geometry(input)
  shape.gradOutput(self, gradOutput, sizes)
  self.gradInput:resizeAs(input)
  resample.run(self._mode, self.gradInput, gradOutput:contiguous(), P, H, W, oH, oW, self.scale_factor, true)
  return self.gradInput
end
