-- The mean of each kW x kH window (stride dW,dH; zero padding padW,padH). The divisor counts
-- the padding (count_include_pad, the default) or only the in-image elements; with divide =
-- false the windows' sums are scaled back by kW*kH, as torch7. The passes: nn/util/pool.lua
-- (the op table's pool_avg_*).
local pool = require 'nn.util.pool'
local SpatialAveragePooling, parent = torch.class('nn.SpatialAveragePooling', 'nn.Module')
SpatialAveragePooling._deviceKernel = true

function SpatialAveragePooling:__init(kW, kH, dW, dH, padW, padH)
  parent.__init(self)
  self.kW, self.kH = kW, kH
  self.dW, self.dH = dW or 1, dH or 1
  self.padW, self.padH = padW or 0, padH or 0
  self.ceil_mode = false
  self.count_include_pad = true
  self.divide = true
end

pool.install(SpatialAveragePooling, 'avg', 2)

function SpatialAveragePooling:setCountIncludePad() self.count_include_pad = true; return self end
function SpatialAveragePooling:setCountExcludePad() self.count_include_pad = false; return self end

function SpatialAveragePooling:__tostring__()
  local s = ('%s(%dx%d, %d,%d'):format(torch.type(self), self.kW, self.kH, self.dW, self.dH)
  if self.padW ~= 0 or self.padH ~= 0 then s = s .. (', %d,%d'):format(self.padW, self.padH) end
  return s .. ')'
end
