-- Bilinear resampling of C x H x W (or N x C x H x W) images to oheight x owidth, or to
-- floor(rheight * H) x floor(rwidth * W); corners stay aligned (output y reads input
-- y * (H-1)/(oH-1)), as nnx's kernel. Nearest/average variants: SpatialUpSampling,
-- SpatialDownSampling, SpatialReSamplingEx.
local resample = require 'nn.util.resample'
local SpatialReSampling, parent = torch.class('nn.SpatialReSampling', 'nn.Module')

function SpatialReSampling:__init(...)
  parent.__init(self)
  xlua.unpack_class(self, {...}, 'nn.SpatialReSampling', 'bilinear resampling of images',
    {arg = 'rwidth', type = 'number', help = 'ratio: owidth/iwidth'},
    {arg = 'rheight', type = 'number', help = 'ratio: oheight/iheight'},
    {arg = 'owidth', type = 'number', help = 'output width'},
    {arg = 'oheight', type = 'number', help = 'output height'})
  if not (self.owidth or self.rwidth) or not (self.oheight or self.rheight) then
    error('nn.SpatialReSampling: give owidth/oheight or rwidth/rheight', 2)
  end
end

-- P planes of H x W and the output size, checked.
function SpatialReSampling:_sizes(input)
  local d = input:dim()
  if d ~= 3 and d ~= 4 then
    error(('nn.SpatialReSampling: input must be 3D or 4D, received: [%s]')
      :format(table.concat(input:size():totable(), ', ')), 3)
  end
  local H, W = input:size(d - 1), input:size(d)
  local oH = math.floor(self.oheight or self.rheight * H)
  local oW = math.floor(self.owidth or self.rwidth * W)
  if oH < 1 or oW < 1 then
    error(('nn.SpatialReSampling: output size %dx%d from input [%s] is empty')
      :format(oH, oW, table.concat(input:size():totable(), ', ')), 3)
  end
  return input:nElement() / (H * W), H, W, oH, oW
end

local function resized(t, H, W)
  local size = t:size()
  size[#size - 1], size[#size] = H, W
  return size
end

function SpatialReSampling:updateOutput(input)
  local P, H, W, oH, oW = self:_sizes(input)
  self._input = input:contiguous()
  self.output:resize(resized(input, oH, oW))
  resample.run('bilinear', self._input, self.output, P, H, W, oH, oW, nil, false)
  return self.output
end

-- The output size is gradOutput's, as nnx's kernel read it (dpnn's SpatialGlimpse tests backward
-- through a size other than the forward's); its planes must be the input's.
function SpatialReSampling:updateGradInput(input, gradOutput)
  local P, H, W = self:_sizes(input)
  local d = input:dim()
  local oH = gradOutput:dim() == d and gradOutput:size(d - 1) or 0
  local oW = gradOutput:dim() == d and gradOutput:size(d) or 0
  if oH * oW == 0 or gradOutput:nElement() ~= P * oH * oW then
    error(('nn.SpatialReSampling: gradOutput [%s] does not have the planes of input [%s]')
      :format(table.concat(gradOutput:size():totable(), ', '),
              table.concat(input:size():totable(), ', ')), 2)
  end
  self.gradInput:resizeAs(input)
  resample.run('bilinear', self.gradInput, gradOutput:contiguous(), P, H, W, oH, oW, nil, true)
  return self.gradInput
end
