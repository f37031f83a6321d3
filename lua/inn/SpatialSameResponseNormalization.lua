-- inn.SpatialSameResponseNormalization(size = 3, alpha = 5e-5, beta = 0.75): within-channel local
-- response normalization, x / (1 + alpha * avg_{size x size}(x^2))^beta, the average over a
-- zero-padded size x size window divided by size^2 (Caffe's WITHIN_CHANNEL LRN).
require 'inn.env'
local SpatialSameResponseNormalization, parent =
  torch.class('inn.SpatialSameResponseNormalization', 'nn.Sequential')

function SpatialSameResponseNormalization:__init(size, alpha, beta)
  parent.__init(self)
  self.size, self.alpha, self.beta = size or 3, alpha or 5e-5, beta or 0.75
  if self.size % 2 ~= 1 then
    error('inn.SpatialSameResponseNormalization: the window size must be odd, got ' .. tostring(self.size), 2)
  end
  local pad = (self.size - 1) / 2
  local scale = nn.Sequential()
    :add(nn.Square())
    :add(nn.SpatialAveragePooling(self.size, self.size, 1, 1, pad, pad))
    :add(nn.MulConstant(self.alpha, true))
    :add(nn.AddConstant(1, true))
    :add(nn.Power(self.beta))
  self:add(nn.ConcatTable():add(nn.Identity()):add(scale))
  self:add(nn.CDivTable())
end
