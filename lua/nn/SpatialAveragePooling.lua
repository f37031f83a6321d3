-- The mean of each kW x kH window (stride dW,dH; zero padding padW,padH). The divisor counts
-- the padding (count_include_pad, the default) or only the in-image elements; with divide =
-- false the windows' sums are scaled back by kW*kH, as torch7. CUDA input runs the array
-- module's passes (luabridge/backend/cuda_nn.py).
local pool = require 'nn.kernels.pool'
local shape = require 'nn.kernels.shape'
local cuda = require 'torch.backend.cuda'
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

-- The output size, divisor settings and window geometry of the device passes.
local function windows(self, g)
  local p = g.p
  return g.O[2], g.O[3], self.count_include_pad ~= false, self.divide ~= false,
    p.k[2], p.k[3], p.d[2], p.d[3], p.pad[2], p.pad[3], 1, 1
end

local hostForward, hostBackward = SpatialAveragePooling.updateOutput, SpatialAveragePooling.updateGradInput

function SpatialAveragePooling:updateOutput(input)
  if not (torch.isTensor(input) and input._device) then return hostForward(self, input) end
  local g = pool.geometry(self, input, 2, pool.params(self))
  self.output:resize(g.sizes)
  cuda.call('avg_pool_forward', self.output, input, windows(self, g))
  return self.output
end

function SpatialAveragePooling:updateGradInput(input, gradOutput)
  if not (self.gradInput and torch.isTensor(input) and input._device) then
    return hostBackward(self, input, gradOutput)
  end
  local g = pool.geometry(self, input, 2, pool.params(self))
  shape.gradOutput(self, gradOutput, g.sizes)
  self.gradInput:resizeAs(input)
  cuda.call('avg_pool_backward', self.gradInput, gradOutput, windows(self, g))
  return self.gradInput
end

function SpatialAveragePooling:setCountIncludePad() self.count_include_pad = true; return self end
function SpatialAveragePooling:setCountExcludePad() self.count_include_pad = false; return self end

function SpatialAveragePooling:__tostring__()
  local s = ('%s(%dx%d, %d,%d'):format(torch.type(self), self.kW, self.kH, self.dW, self.dH)
  if self.padW ~= 0 or self.padH ~= 0 then s = s .. (', %d,%d'):format(self.padW, self.padH) end
  return s .. ')'
end
