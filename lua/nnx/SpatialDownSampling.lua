-- Average downsampling of C x H x W images by integer ratios rW, rH: each output pixel is the
-- mean of one rH x rW block; rows and columns past the last whole block are dropped.
local SpatialDownSampling, parent = torch.class('nn.SpatialDownSampling', 'nn.Module')

function SpatialDownSampling:__init(...)
  parent.__init(self)
  xlua.unpack_class(self, {...}, 'nn.SpatialDownSampling', 'average downsampling of images',
    {arg = 'rW', type = 'number', help = 'width ratio', req = true},
    {arg = 'rH', type = 'number', help = 'height ratio', req = true})
  if self.rW < 1 or self.rH < 1 or self.rW % 1 ~= 0 or self.rH % 1 ~= 0 then
    error(('nn.SpatialDownSampling: rW and rH must be positive integers (got %s, %s)')
      :format(tostring(self.rW), tostring(self.rH)), 2)
  end
end

-- The rH x rW blocks of t (C x H x W) as a C x oH x oW x rH x rW view.
function SpatialDownSampling:_blocks(t)
  return t:unfold(2, self.rH, self.rH):unfold(3, self.rW, self.rW)
end

function SpatialDownSampling:updateOutput(input)
  if input:dim() ~= 3 or input:size(2) < self.rH or input:size(3) < self.rW then
    error(('nn.SpatialDownSampling: expected a C x H x W input of at least %dx%d pixels, got size [%s]')
      :format(self.rH, self.rW, table.concat(input:size():totable(), 'x')), 2)
  end
  self._rows = self._rows or input.new()
  self._blockSums = self._blockSums or input.new()
  self._rows:sum(self:_blocks(input), 5)
  self._blockSums:sum(self._rows, 4)
  local C, oH, oW = self._blockSums:size(1), self._blockSums:size(2), self._blockSums:size(3)
  self.output:resize(C, oH, oW):copy(self._blockSums:view(C, oH, oW)):div(self.rH * self.rW)
  return self.output
end

function SpatialDownSampling:updateGradInput(input, gradOutput)
  self.gradInput:resizeAs(input):zero()
  local blocks = self:_blocks(self.gradInput)
  local C, oH, oW = blocks:size(1), blocks:size(2), blocks:size(3)
  blocks:copy(gradOutput:view(C, oH, oW, 1, 1):expand(C, oH, oW, self.rH, self.rW))
  self.gradInput:div(self.rH * self.rW)
  return self.gradInput
end
