-- The maximum of each kW x kH window (stride dW,dH; implicit -inf padding padW,padH); indices
-- keep where each maximum came from (1-based offsets in its plane) for the gradient; a
-- CudaLongTensor for CUDA input. The passes: nn/util/pool.lua and the op table's pool_max_* (backend/cpu/nn_pool.lua).
local pool = require 'nn.util.pool'
local SpatialMaxPooling, parent = torch.class('nn.SpatialMaxPooling', 'nn.Module')
SpatialMaxPooling._deviceKernel = true

function SpatialMaxPooling:__init(kW, kH, dW, dH, padW, padH)
  parent.__init(self)
  self.kW, self.kH = kW, kH
  self.dW, self.dH = dW or kW, dH or kH
  self.padW, self.padH = padW or 0, padH or 0
  self.ceil_mode = false
  self.indices = torch.LongTensor()
end

pool.install(SpatialMaxPooling, 'max', 2)

function SpatialMaxPooling:__tostring__()
  local s = ('%s(%dx%d, %d,%d'):format(torch.type(self), self.kW, self.kH, self.dW, self.dH)
  if self.padW ~= 0 or self.padH ~= 0 then s = s .. (', %d,%d'):format(self.padW, self.padH) end
  return s .. ')'
end

function SpatialMaxPooling:empty() return self:clearState() end
