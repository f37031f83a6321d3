-- The retina of the recurrent attention model (arXiv:1406.6247): input {images, locations}
-- (channels x H x W and y, x in [-1, 1], or batches of them); output depth patches centred on
-- the location, patch d being (scale^(d-1)) times the size of the first and reduced to
-- height x width (average pooling when scale is 2, nnx's SpatialReSampling otherwise), stacked
-- along the channels (depth * channels x height x width). Outside the image counts as zero.
-- No gradient flows to the locations.
local SpatialGlimpse, parent = torch.class('nn.SpatialGlimpse', 'nn.Module')

function SpatialGlimpse:__init(size, depth, scale)
  parent.__init(self)
  if torch.type(size) == 'table' then
    self.height, self.width = size[1], size[2]
  else
    self.height, self.width = size, size
  end
  self.depth = depth or 3
  self.scale = scale or 2
  for _, key in ipairs({ 'width', 'height', 'depth', 'scale' }) do
    if type(self[key]) ~= 'number' then
      error(('nn.SpatialGlimpse: %s should be a number, got %s'):format(key, torch.type(self[key])), 2)
    end
  end
  self.gradInput = { torch.Tensor(), torch.Tensor() }
  if self.scale == 2 then
    self.module = nn.SpatialAveragePooling(2, 2, 2, 2)
  else
    dpnn.require('nnx')
    self.module = nn.SpatialReSampling { oheight = self.height, owidth = self.width }
  end
  self.modules = { self.module }
end

local function unpackInput(self, input)
  if torch.type(input) ~= 'table' or #input < 2 then
    error('nn.SpatialGlimpse: expecting the input {images, locations}', 3)
  end
  local images, locations = self:toBatch(input[1], 3), self:toBatch(input[2], 1)
  if images:dim() ~= 4 or locations:dim() ~= 2 then
    error(('nn.SpatialGlimpse: expecting 3D/4D images and 1D/2D locations, got %dD and %dD'):format(
      input[1]:dim(), input[2]:dim()), 3)
  end
  return images, locations
end

-- Each depth's patch: its size, the image zero-padded around by half of it into self._pad, and
-- the patch's view of that padded image at the location (y, x) in [-1, 1].
function SpatialGlimpse:_patches(images, y, x)
  local channels, iH, iW = images:size(2), images:size(3), images:size(4)
  y, x = (y + 1) / 2, (x + 1) / 2
  local gH, gW = math.floor(self.height), math.floor(self.width)
  local d = 0
  return function()
    d = d + 1
    if d > self.depth then return nil end
    if d > 1 then gH, gW = math.floor(gH * self.scale), math.floor(gW * self.scale) end
    local padH, padW = math.floor((gH - 1) / 2), math.floor((gW - 1) / 2)
    self._pad:resize(channels, iH + 2 * padH, iW + 2 * padW):zero()
    local inner = self._pad:narrow(2, padH + 1, iH):narrow(3, padW + 1, iW)
    local h, w = self._pad:size(2) - gH, self._pad:size(3) - gW
    local top = math.floor(math.min(h, math.max(0, y * h)))
    local left = math.floor(math.min(w, math.max(0, x * w)))
    return d, self._pad:narrow(2, top + 1, gH):narrow(3, left + 1, gW), inner
  end
end

-- Sets the average pooling to reduce a patch of size (patchH, patchW) by integer factors.
function SpatialGlimpse:_setPooling(patchH, patchW)
  if torch.type(self.module) ~= 'nn.SpatialAveragePooling' then return end
  local kW, kH = patchW / self.width, patchH / self.height
  assert(kW % 2 == 0 and kH % 2 == 0, 'nn.SpatialGlimpse: patch sizes should be even multiples of the glimpse size')
  self.module.kW, self.module.kH, self.module.dW, self.module.dH = kW, kH, kW, kH
end

function SpatialGlimpse:updateOutput(input)
  local images, locations = unpackInput(self, input)
  local n, channels = images:size(1), images:size(2)
  self.output:resize(n, self.depth, channels, self.height, self.width)
  self._crop = self._crop or self.output.new()
  self._pad = self._pad or images.new()
  for i = 1, n do
    for d, patch, inner in self:_patches(images, locations[i][1], locations[i][2]) do
      inner:copy(images[i])
      if d == 1 then
        self.output[i][d]:copy(patch)
      else
        self._crop:resizeAs(patch):copy(patch)
        self:_setPooling(patch:size(2), patch:size(3))
        self.output[i][d]:copy(self.module:updateOutput(self._crop))
      end
    end
  end
  self.output:resize(n, self.depth * channels, self.height, self.width)
  self.output = self:fromBatch(self.output, 1)
  return self.output
end

function SpatialGlimpse:updateGradInput(input, gradOutput)
  local images, locations = unpackInput(self, input)
  if #self.gradInput ~= 2 then self.gradInput = { images.new(), images.new() } end
  local gradImages, gradLocations = self.gradInput[1], self.gradInput[2]
  gradImages:resizeAs(images):zero()
  gradLocations:resizeAs(locations):zero()
  gradOutput = self:toBatch(gradOutput, 3):view(images:size(1), self.depth, images:size(2), self.height, self.width)
  for i = 1, images:size(1) do
    for d, patch, inner in self:_patches(images, locations[i][1], locations[i][2]) do
      if d == 1 then
        patch:copy(gradOutput[i][d])
      else
        self._crop:resizeAs(patch)
        self:_setPooling(patch:size(2), patch:size(3))
        patch:copy(self.module:updateGradInput(self._crop, gradOutput[i][d]))
      end
      gradImages[i]:add(inner)
    end
  end
  self.gradInput[1] = self:fromBatch(gradImages, 1)
  self.gradInput[2] = self:fromBatch(gradLocations, 1)
  return self.gradInput
end
