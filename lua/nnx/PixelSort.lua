-- Space to depth, the inverse of nn.PixelShuffle: each r x r block of a (batch x) C x H x W input
-- becomes r*r channels, giving (batch x) C*r*r x H/r x W/r; output channel c*r*r + i*r + j holds
-- the pixels at offset (i, j) of their blocks.
local PixelSort, parent = torch.class('nn.PixelSort', 'nn.Module')

function PixelSort:__init(downscaleFactor)
  parent.__init(self)
  if type(downscaleFactor) ~= 'number' or downscaleFactor < 1 or downscaleFactor % 1 ~= 0 then
    error(('nn.PixelSort: downscaleFactor must be a positive integer, got %s'):format(tostring(downscaleFactor)), 2)
  end
  self.downscaleFactor = downscaleFactor
  self.downscaleFactorSquared = downscaleFactor * downscaleFactor
  self._sorted = torch.Tensor()
  self._unsorted = torch.Tensor()
end

-- B, C, H/r, W/r of input, checked.
function PixelSort:_sizes(input)
  local r, d = self.downscaleFactor, input:dim()
  if (d ~= 3 and d ~= 4) or input:size(d - 1) % r ~= 0 or input:size(d) % r ~= 0 then
    error(('nn.PixelSort: expected a (batch x) C x H x W input with H and W multiples of %d, got size [%s]')
      :format(r, table.concat(input:size():totable(), 'x')), 3)
  end
  local B = d == 4 and input:size(1) or 1
  return B, input:size(d - 2), input:size(d - 1) / r, input:size(d) / r
end

function PixelSort:updateOutput(input)
  local B, C, oH, oW = self:_sizes(input)
  local r = self.downscaleFactor
  local blocks = input:contiguous():view(B, C, oH, r, oW, r):permute(1, 2, 4, 6, 3, 5)
  self._sorted = self._sorted:typeAs(input):resize(B, C, r, r, oH, oW):copy(blocks)
  local channels = C * self.downscaleFactorSquared
  self.output = input:dim() == 4 and self._sorted:view(B, channels, oH, oW) or self._sorted:view(channels, oH, oW)
  return self.output
end

function PixelSort:updateGradInput(input, gradOutput)
  local B, C, oH, oW = self:_sizes(input)
  local r = self.downscaleFactor
  local blocks = gradOutput:contiguous():view(B, C, r, r, oH, oW):permute(1, 2, 5, 3, 6, 4)
  self._unsorted = self._unsorted:typeAs(input):resize(B, C, oH, r, oW, r):copy(blocks)
  self.gradInput = self._unsorted:view(input:size())
  return self.gradInput
end
