-- The maximum of each kW x kH window (stride dW,dH; implicit -inf padding padW,padH); indices
-- keep where each maximum came from (1-based offsets in its plane) for the gradient; a
-- CudaLongTensor for CUDA input, whose passes run in the array module (luabridge/backend/cuda_nn.py).
local pool = require 'nn.kernels.pool'
local shape = require 'nn.kernels.shape'
local cuda = require 'torch.backend.cuda'
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

-- The output size and window geometry of the device passes.
local function windows(g)
  local p = g.p
  return g.O[2], g.O[3], p.k[2], p.k[3], p.d[2], p.d[3], p.pad[2], p.pad[3], p.dil[2], p.dil[3]
end

local hostForward, hostBackward = SpatialMaxPooling.updateOutput, SpatialMaxPooling.updateGradInput

function SpatialMaxPooling:updateOutput(input)
  if not (torch.isTensor(input) and input._device) then return hostForward(self, input) end
  local g = pool.geometry(self, input, 2, pool.params(self))
  self.iheight, self.iwidth = g.I[2], g.I[3]
  if torch.type(self.indices) ~= 'torch.CudaLongTensor' then self.indices = torch.CudaLongTensor() end
  shape.resize(self.output, g.sizes)
  shape.resize(self.indices, g.sizes)
  cuda.call('max_pool_forward', self.output, self.indices, input, windows(g))
  return self.output
end

function SpatialMaxPooling:updateGradInput(input, gradOutput)
  if not (self.gradInput and torch.isTensor(input) and input._device) then
    return hostBackward(self, input, gradOutput)
  end
  local g = pool.geometry(self, input, 2, pool.params(self))
  shape.gradOutput(self, gradOutput, g.sizes)
  if not self.indices or self.indices:nElement() ~= gradOutput:nElement() then
    shape.fail(self, 'call updateOutput with this input before updateGradInput')
  end
  self.gradInput:resizeAs(input)
  cuda.call('max_pool_backward', self.gradInput, gradOutput, self.indices)
  return self.gradInput
end

function SpatialMaxPooling:__tostring__()
  local s = ('%s(%dx%d, %d,%d'):format(torch.type(self), self.kW, self.kH, self.dW, self.dH)
  if self.padW ~= 0 or self.padH ~= 0 then s = s .. (', %d,%d'):format(self.padW, self.padH) end
  return s .. ')'
end

function SpatialMaxPooling:empty() return self:clearState() end
