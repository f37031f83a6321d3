-- The transpose of SpatialConvolution ("deconvolution"): each input pixel adds its weighted
-- kernel to the output, giving (H-1)*dH - 2*padH + kH + adjH rows (likewise columns).
-- Weight is nInputPlane x nOutputPlane x kH x kW, as torch7. The passes are the op table's
-- (spatial_full_conv_*: backend/cpu/nn_conv.lua, one GEMM per image and col2im, or oneDNN;
-- backend/cuda/nn_conv.lua).
-- The input may be {input, target}: adjW/adjH then make the output size the target's.
local shape = require 'nn.util.shape'
local backend = require 'torch.backend'

local SpatialFullConvolution, parent = torch.class('nn.SpatialFullConvolution', 'nn.Module')
SpatialFullConvolution._deviceKernel = true   -- CUDA: the op table's spatial_full_conv_*

function SpatialFullConvolution:__init(nInputPlane, nOutputPlane, kW, kH, dW, dH, padW, padH, adjW, adjH)
  parent.__init(self)
  self.nInputPlane, self.nOutputPlane = nInputPlane, nOutputPlane
  self.kW, self.kH = kW, kH
  self.dW, self.dH = dW or 1, dH or 1
  self.padW, self.padH = padW or 0, padH or 0
  self.adjW, self.adjH = adjW or 0, adjH or 0
  shape.positive(self, 'plane counts, kernel sizes and strides', nInputPlane, nOutputPlane,
    kW, kH, self.dW, self.dH)
  shape.nonNegative(self, 'paddings and adjustments', self.padW, self.padH, self.adjW, self.adjH)
  if self.adjW > self.dW - 1 or self.adjH > self.dH - 1 then
    shape.fail(self, 'adjW and adjH must be smaller than dW and dH, got adj %d,%d for stride %d,%d',
      self.adjW, self.adjH, self.dW, self.dH)
  end
  self.weight = torch.Tensor(nInputPlane, nOutputPlane, kH, kW)
  self.gradWeight = torch.Tensor(nInputPlane, nOutputPlane, kH, kW)
  self.bias = torch.Tensor(nOutputPlane)
  self.gradBias = torch.Tensor(nOutputPlane)
  self:reset()
end

SpatialFullConvolution.noBias = nn.SpatialConvolution.noBias
SpatialFullConvolution.reset = nn.SpatialConvolution.reset

SpatialFullConvolution._dims = { 'H', 'W' }

-- input, target and the geometry: the output is the "image" that im2col/col2im walk, the
-- input pixels are their column positions. Serves any dims (self._dims; fields k*, d*, pad*,
-- adj* per dim).
function SpatialFullConvolution:_geometry(input)
  local target
  if type(input) == 'table' and not torch.isTensor(input) then input, target = input[1], input[2] end
  local dims = self._dims
  local batch, B, _, s = shape.input(self, input, #dims, self.nInputPlane)
  local nOut = self.nOutputPlane
  local g = { batch = batch, B = B, C = nOut, O = self.nInputPlane, M = 1, N = 1, K = nOut }
  local outs, ks = {}, {}
  for i, d in ipairs(dims) do
    local k, st, pad, adj = self['k' .. d], self['d' .. d], self['pad' .. d], self['adj' .. d]
    if target then adj = (target:size(target:dim() - #dims + i) + 2 * pad - k) % st end
    local o = (s[i] - 1) * st - 2 * pad + k + adj
    g[d], g['o' .. d], g['k' .. d], g['d' .. d], g['pad' .. d] = o, s[i], k, st, pad
    g.M, g.N, g.K = g.M * o, g.N * s[i], g.K * k
    outs[i], ks[i] = o, k
  end
  shape.output(self, input, outs, 'kernel ' .. table.concat(ks, 'x'))
  g.sizes = batch and { B, nOut, unpack(outs) } or { nOut, unpack(outs) }
  return input, target, g
end

function SpatialFullConvolution:updateOutput(input)
  local x, _, g = self:_geometry(input)
  self.output:resize(g.sizes)
  backend.of(x).spatial_full_conv_forward(self, g, self.output, x, self.weight, self.bias)
  return self.output
end

function SpatialFullConvolution:updateGradInput(input, gradOutput)
  if not self.gradInput then return end
  local x, target, g = self:_geometry(input)
  if not target and not torch.isTensor(self.gradInput) then self.gradInput = x.new() end
  local gi = target and (self._gradInput or x.new()) or self.gradInput
  gi:resizeAs(x)
  shape.gradOutput(self, gradOutput, g.sizes)
  backend.of(x).spatial_full_conv_grad_input(self, g, gi, gradOutput, self.weight)
  if target then   -- {gradInput, a single zero expanded to the target's size}, as torch7
    self._gradInput = gi
    local ones = {}
    for d = 1, target:dim() do ones[d] = 1 end
    local zero = target.new(1):zero():view(unpack(ones))
    self.gradInput = { gi, zero:expand(target:size()) }
  end
  return self.gradInput
end

function SpatialFullConvolution:accGradParameters(input, gradOutput, scale)
  local x, _, g = self:_geometry(input)
  shape.gradOutput(self, gradOutput, g.sizes)
  backend.of(x).spatial_full_conv_acc_grad(self, g, self.gradWeight, self.gradBias, x, gradOutput, scale or 1)
end

function SpatialFullConvolution:type(type, tensorCache)
  self.columns = nil
  self._gradInput = nil
  return parent.type(self, type, tensorCache)
end

function SpatialFullConvolution:__tostring__()
  local s = ('%s(%d -> %d, %dx%d'):format(torch.type(self), self.nInputPlane, self.nOutputPlane,
    self.kW, self.kH)
  if self.dW ~= 1 or self.dH ~= 1 or self.padW ~= 0 or self.padH ~= 0 then
    s = s .. (', %d,%d'):format(self.dW, self.dH)
  end
  if self.padW ~= 0 or self.padH ~= 0 or self.adjW ~= 0 or self.adjH ~= 0 then
    s = s .. (', %d,%d'):format(self.padW, self.padH)
  end
  if self.adjW ~= 0 or self.adjH ~= 0 then s = s .. (', %d,%d'):format(self.adjW, self.adjH) end
  return s .. (self.bias and ')' or ') without bias')
end

function SpatialFullConvolution:clearState()
  return parent.clearState(self, 'columns', '_gradInput')
end
