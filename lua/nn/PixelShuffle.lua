-- Sub-pixel rearrangement: (C*r*r) x H x W becomes C x (H*r) x (W*r) (optionally batched),
-- output[c][h*r+i][w*r+j] = input[c*r*r + i*r + j][h][w] (0-based).
local check = require 'torch.core.check'
local PixelShuffle, parent = torch.class('nn.PixelShuffle', 'nn.Module')

function PixelShuffle:__init(upscaleFactor)
  parent.__init(self)
  self.upscaleFactor = check.int('nn.PixelShuffle', upscaleFactor, 'upscaleFactor', 1)
  self.upscaleFactorSquared = upscaleFactor * upscaleFactor
end

-- batch, channels / r^2, height, width of a 3-D or 4-D input.
function PixelShuffle:_dims(input)
  local nd = input:dim()
  if nd ~= 3 and nd ~= 4 then
    error(string.format('nn.PixelShuffle: expected a 3D or 4D input, got %dD', nd))
  end
  local b = nd == 4 and input:size(1) or 1
  local c, h, w = input:size(nd - 2), input:size(nd - 1), input:size(nd)
  if c % self.upscaleFactorSquared ~= 0 then
    error(string.format('nn.PixelShuffle: %d input planes is not a multiple of upscaleFactor^2 = %d',
      c, self.upscaleFactorSquared))
  end
  return b, c / self.upscaleFactorSquared, h, w
end

function PixelShuffle:updateOutput(input)
  local r = self.upscaleFactor
  local b, c, h, w = self:_dims(input)
  local view = input:contiguous():view(b, c, r, r, h, w)
  self._shuffleOut = self._shuffleOut or input.new()
  self._shuffleOut:resize(b, c, h, r, w, r):copy(view:permute(1, 2, 5, 3, 6, 4))
  if input:dim() == 4 then
    self.output = self._shuffleOut:view(b, c, h * r, w * r)
  else
    self.output = self._shuffleOut:view(c, h * r, w * r)
  end
  return self.output
end

function PixelShuffle:updateGradInput(input, gradOutput)
  local r = self.upscaleFactor
  local b, c, h, w = self:_dims(input)
  local view = gradOutput:contiguous():view(b, c, h, r, w, r)
  self._shuffleIn = self._shuffleIn or input.new()
  self._shuffleIn:resize(b, c, r, r, h, w):copy(view:permute(1, 2, 4, 6, 3, 5))
  self.gradInput = self._shuffleIn:view(input:size())
  return self.gradInput
end

function PixelShuffle:clearState()
  return parent.clearState(self, '_shuffleIn', '_shuffleOut')
end
