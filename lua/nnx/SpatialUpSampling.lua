-- Nearest-neighbour upsampling by integer factors dW, dH of the (yDim, xDim) pair of an input
-- (default dims 2 and 3: C x H x W); each input pixel becomes a dH x dW block.
local planes = require 'nnx.util.planes'
local SpatialUpSampling, parent = torch.class('nn.SpatialUpSampling', 'nn.Module')

function SpatialUpSampling:__init(...)
  parent.__init(self)
  xlua.unpack_class(self, {...}, 'nn.SpatialUpSampling', 'nearest-neighbour upsampling of images',
    {arg = 'dW', type = 'number', help = 'width factor', req = true},
    {arg = 'dH', type = 'number', help = 'height factor', req = true},
    {arg = 'yDim', type = 'number', help = 'image y dimension', default = 2},
    {arg = 'xDim', type = 'number', help = 'image x dimension', default = 3})
  planes.checkDims('nn.SpatialUpSampling', self.yDim, self.xDim)
  if self.dW < 1 or self.dH < 1 or self.dW % 1 ~= 0 or self.dH % 1 ~= 0 then
    error(('nn.SpatialUpSampling: dW and dH must be positive integers (got %s, %s)')
      :format(tostring(self.dW), tostring(self.dH)), 2)
  end
end

function SpatialUpSampling:updateOutput(input)
  local N, H, W, M = planes.around(self, input, self.yDim, self.xDim)
  local dH, dW = self.dH, self.dW
  local blocks = input:reshape(N, H, 1, W, 1, M):expand(N, H, dH, W, dW, M)
  self.output = self.output:resize(N, H, dH, W, dW, M):copy(blocks)
    :view(planes.resized(input, self.yDim, self.xDim, H * dH, W * dW))
  return self.output
end

function SpatialUpSampling:updateGradInput(input, gradOutput)
  local N, H, W, M = planes.around(self, input, self.yDim, self.xDim)
  local blocks = gradOutput:reshape(N, H, self.dH, W, self.dW, M)
  self._rows = self._rows or input.new()
  self._blockSums = self._blockSums or input.new()
  self._rows:sum(blocks, 5)
  self.gradInput = self._blockSums:sum(self._rows, 3):view(input:size())
  return self.gradInput
end
