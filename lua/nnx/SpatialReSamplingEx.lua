-- Resampling of the (yDim, xDim) pair of an input of any rank to oheight x owidth (or
-- round(rheight * H) x round(rwidth * W)), in one of nnx's three modes:
--   simple: nearest pixel; upsampling repeats each pixel ceil(oH/H) times, downsampling takes
--           every floor(H/oH)-th pixel from the first;
--   average: upsampling as simple, downsampling averages floor(H/oH) x floor(W/oW) blocks;
--   bilinear: corner-aligned bilinear interpolation, as SpatialReSampling.
local planes = require 'nnx.util.planes'
local resample = require 'nn.util.resample'
local SpatialReSamplingEx, parent = torch.class('nn.SpatialReSamplingEx', 'nn.Module')

local modes = {simple = true, average = true, bilinear = true}

function SpatialReSamplingEx:__init(...)
  parent.__init(self)
  xlua.unpack_class(self, {...}, 'nn.SpatialReSamplingEx', 'extended spatial resampling',
    {arg = 'rwidth', type = 'number', help = 'ratio: owidth/iwidth'},
    {arg = 'rheight', type = 'number', help = 'ratio: oheight/iheight'},
    {arg = 'owidth', type = 'number', help = 'output width'},
    {arg = 'oheight', type = 'number', help = 'output height'},
    {arg = 'mode', type = 'string', help = 'simple | average | bilinear', default = 'simple'},
    {arg = 'yDim', type = 'number', help = 'image y dimension', default = 2},
    {arg = 'xDim', type = 'number', help = 'image x dimension', default = 3})
  planes.checkDims('nn.SpatialReSamplingEx', self.yDim, self.xDim)
  if not modes[self.mode] then
    error(('nn.SpatialReSamplingEx: mode must be simple | average | bilinear, got %s'):format(self.mode), 2)
  end
  if not (self.owidth or self.rwidth) or not (self.oheight or self.rheight) then
    error('nn.SpatialReSamplingEx: give owidth/oheight or rwidth/rheight', 2)
  end
end

local function round(a) return math.floor(a + 0.5) end

-- 1-based source index of each of the n outputs: i -> f(i) for i = 0..n-1.
local function sourceIndex(n, f)
  local idx = torch.LongTensor(n)
  for i = 0, n - 1 do idx[i + 1] = f(i) + 1 end
  return idx
end

-- The sizes of this call: the N x H x W x M view, and the output's oH x oW, checked.
function SpatialReSamplingEx:_sizes(input)
  local N, H, W, M = planes.around(self, input, self.yDim, self.xDim)
  local oH = self.oheight or round(self.rheight * H)
  local oW = self.owidth or round(self.rwidth * W)
  if oH < 1 or oW < 1 then
    error(('nn.SpatialReSamplingEx: output size %dx%d from %dx%d is empty'):format(oH, oW, H, W), 3)
  end
  if (oH >= H) ~= (oW >= W) then
    error(('nn.SpatialReSamplingEx: cannot upsample one dimension while downsampling the other (%dx%d -> %dx%d)')
      :format(H, W, oH, oW), 3)
  end
  return N, H, W, M, oH, oW
end

-- Row and column source indices of the simple/nearest modes.
local function nearestIndices(H, W, oH, oW)
  if oH >= H then
    local dH, dW = math.ceil(oH / H), math.ceil(oW / W)
    return sourceIndex(oH, function(y) return math.floor(y / dH) end),
           sourceIndex(oW, function(x) return math.floor(x / dW) end)
  end
  local dH, dW = math.floor(H / oH), math.floor(W / oW)
  return sourceIndex(oH, function(y) return y * dH end), sourceIndex(oW, function(x) return x * dW end)
end

-- The dH x dW blocks of x (N x H x W x M) that the oH x oW average reads: N x oH x oW x M x dH x dW.
local function averageBlocks(x, H, W, oH, oW)
  local dH, dW = math.floor(H / oH), math.floor(W / oW)
  return x:narrow(2, 1, oH * dH):narrow(3, 1, oW * dW):unfold(2, dH, dH):unfold(3, dW, dW), dH * dW
end

-- x (N x H x W x M) as P = N*M contiguous planes, for the bilinear kernel, and back.
local function toPlanes(x) return x:permute(1, 4, 2, 3):contiguous() end
local function fromPlanes(p) return p:permute(1, 3, 4, 2) end

function SpatialReSamplingEx:updateOutput(input)
  local N, H, W, M, oH, oW = self:_sizes(input)
  local x = input:reshape(N, H, W, M)
  self.output:resize(N, oH, oW, M)
  if self.mode == 'bilinear' then
    self._planes = self._planes or input.new()
    self._planes:resize(N, M, oH, oW)
    resample.run('bilinear', toPlanes(x), self._planes, N * M, H, W, oH, oW, nil, false)
    self.output:copy(fromPlanes(self._planes))
  elseif self.mode == 'average' and oH < H then
    local blocks, area = averageBlocks(x, H, W, oH, oW)
    self._rows = self._rows or input.new()
    self._rows:sum(blocks, 6)
    self.output:sum(self._rows, 5):div(area)
    self.output = self.output:view(N, oH, oW, M)
  else
    local rows, cols = nearestIndices(H, W, oH, oW)
    self.output:copy(x:index(2, rows):index(3, cols))
  end
  self.output = self.output:view(planes.resized(input, self.yDim, self.xDim, oH, oW))
  return self.output
end

function SpatialReSamplingEx:updateGradInput(input, gradOutput)
  local N, H, W, M, oH, oW = self:_sizes(input)
  local g = gradOutput:reshape(N, oH, oW, M)
  self.gradInput:resize(N, H, W, M):zero()
  if self.mode == 'bilinear' then
    self._gradPlanes = self._gradPlanes or input.new()
    self._gradPlanes:resize(N, M, H, W)
    resample.run('bilinear', self._gradPlanes, toPlanes(g), N * M, H, W, oH, oW, nil, true)
    self.gradInput:copy(fromPlanes(self._gradPlanes))
  elseif self.mode == 'average' and oH < H then
    local blocks, area = averageBlocks(self.gradInput, H, W, oH, oW)
    local dH, dW = blocks:size(5), blocks:size(6)
    blocks:copy(g:contiguous():view(N, oH, oW, M, 1, 1):expand(N, oH, oW, M, dH, dW)):div(area)
  else
    local rows, cols = nearestIndices(H, W, oH, oW)
    self._gradRows = self._gradRows or input.new()
    self._gradRows:resize(N, H, oW, M):zero():indexAdd(2, rows, g)
    self.gradInput:indexAdd(3, cols, self._gradRows)
  end
  self.gradInput = self.gradInput:view(input:size())
  return self.gradInput
end
