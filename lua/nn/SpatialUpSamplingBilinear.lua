-- Bilinear upsampling of the last two dims (corners aligned), by an integer scale factor or
-- to a given size ({oheight = .., owidth = ..}).
local shape = require 'nn.util.shape'
local SpatialUpSamplingBilinear, parent = torch.class('nn.SpatialUpSamplingBilinear', 'nn.SpatialUpSamplingNearest')
SpatialUpSamplingBilinear._deviceKernel = true   -- resample.run's device path

function SpatialUpSamplingBilinear:__init(params)
  if torch.type(params) == 'table' then
    nn.Module.__init(self)
    self.owidth, self.oheight = params.owidth, params.oheight
    shape.positive(self, 'owidth and oheight', self.owidth, self.oheight)
  else
    parent.__init(self, params)
  end
end

SpatialUpSamplingBilinear._mode = 'bilinear'

function SpatialUpSamplingBilinear:_outputSize(H, W)
  if self.scale_factor then return H * self.scale_factor, W * self.scale_factor end
  return self.oheight, self.owidth
end

function SpatialUpSamplingBilinear:__tostring__()
  if self.scale_factor then return ('%s(%d)'):format(torch.type(self), self.scale_factor) end
  return ('%s(%d, %d)'):format(torch.type(self), self.oheight, self.owidth)
end
