-- The maximum of each kT x kH x kW window of planes x T x H x W input (or a batch of them).
-- Indices are 1-based offsets in the T x H x W volume (torch7 packs per-dim bytes instead).
local pool = require 'nn.util.pool'
local VolumetricMaxPooling, parent = torch.class('nn.VolumetricMaxPooling', 'nn.Module')

function VolumetricMaxPooling:__init(kT, kW, kH, dT, dW, dH, padT, padW, padH)
  parent.__init(self)
  self.kT, self.kW, self.kH = kT, kW, kH
  self.dT, self.dW, self.dH = dT or kT, dW or kW, dH or kH
  self.padT, self.padW, self.padH = padT or 0, padW or 0, padH or 0
  self.ceil_mode = false
  self.indices = torch.LongTensor()
end

pool.install(VolumetricMaxPooling, 'max', 3)

function VolumetricMaxPooling:__tostring__()
  local s = ('%s(%dx%dx%d, %d,%d,%d'):format(torch.type(self), self.kT, self.kW, self.kH,
    self.dT, self.dW, self.dH)
  if self.padT ~= 0 or self.padW ~= 0 or self.padH ~= 0 then
    s = s .. (', %d,%d,%d'):format(self.padT, self.padW, self.padH)
  end
  return s .. ')'
end
