-- The transpose of SpatialConvolution ("deconvolution"): each input pixel adds its weighted
-- kernel to the output, giving (H-1)*dH - 2*padH + kH + adjH rows (likewise columns).
-- Weight is nInputPlane x nOutputPlane x kH x kW, as torch7. Per image: one GEMM to the
-- nOutputPlane*kH*kW x H*W column matrix, then col2im (kernels/unfold.lua) into the output.
-- The input may be {input, target}: adjW/adjH then make the output size the target's.
local unfold = require 'nn.kernels.unfold'
local planes = require 'nn.kernels.planes'
local shape = require 'nn.kernels.shape'

local SpatialFullConvolution, parent = torch.class('nn.SpatialFullConvolution', 'nn.Module')

function SpatialFullConvolution:__init(nInputPlane, nOutputPlane, kW, kH, dW, dH, padW, padH, adjW, adjH)
  parent.__init(self)
  self.nInputPlane, self.nOutputPlane = nInputPlane, nOutputPlane
  self.kW, self.kH = kW, kH
  self.dW, self.dH = dW or 1, dH or 1
  self.padW, self.padH = padW or 0, padH or 0
  self.adjW, self.adjH = adjW or 0, adjH or 0
  shape.positive(self, 'plane counts, kernel sizes and strides', nInputPlane, nOutputPlane,
    kW, kH, self.dW, self.dH)
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

-- input and the geometry: the output is the "image" that im2col/col2im walk, the input
-- pixels are their column positions.
function SpatialFullConvolution:_geometry(input)
  local target
  if type(input) == 'table' and not torch.isTensor(input) then input, target = input[1], input[2] end
  local batch, B, C, s = shape.input(self, input, 2, self.nInputPlane)
  local H, W = s[1], s[2]
  local adjH, adjW = self.adjH, self.adjW
  if target then
    local nd = target:dim()
    adjH = (target:size(nd - 1) + 2 * self.padH - self.kH) % self.dH
    adjW = (target:size(nd) + 2 * self.padW - self.kW) % self.dW
  end
  local oH = (H - 1) * self.dH - 2 * self.padH + self.kH + adjH
  local oW = (W - 1) * self.dW - 2 * self.padW + self.kW + adjW
  shape.output(self, input, { oH, oW }, ('kernel %dx%d, stride %d,%d, padding %d,%d'):format(
    self.kH, self.kW, self.dH, self.dW, self.padH, self.padW))
  local nOut = self.nOutputPlane
  return input, target, {
    batch = batch, B = B, C = nOut, H = oH, W = oW, kH = self.kH, kW = self.kW, dH = self.dH,
    dW = self.dW, padH = self.padH, padW = self.padW, oH = H, oW = W,
    K = nOut * self.kH * self.kW, N = H * W,
    sizes = batch and { B, nOut, oH, oW } or { nOut, oH, oW } }
end

-- the weight as nInputPlane x K, and its expansion over the batch
local function weights(self, w, B, K)
  if not w:isContiguous() then shape.fail(self, 'weight and gradWeight must be contiguous') end
  local m = w:view(self.nInputPlane, K)
  return m, m:view(1, self.nInputPlane, K):expand(B, self.nInputPlane, K)
end

function SpatialFullConvolution:updateOutput(input)
  local x, _, g = self:_geometry(input)
  x = x:contiguous():view(g.B, self.nInputPlane, g.N)
  local _, w = weights(self, self.weight:contiguous(), g.B, g.K)
  self.columns = self.columns or x.new()
  self.columns:resize(g.B, g.K, g.N):bmm(w:transpose(2, 3), x)
  self.output:resize(g.sizes)
  if self.bias then planes.fill(self.output, self.bias, g.B, g.C, g.H * g.W) end
  unfold.col2im(self.columns, self.output, g, self.bias ~= nil)
  return self.output
end

-- the unfolded gradOutput (checked), B x K x N
function SpatialFullConvolution:_gradColumns(gradOutput, g)
  shape.gradOutput(self, gradOutput, g.sizes)
  self.columns = self.columns or gradOutput.new()
  self.columns:resize(g.B, g.K, g.N)
  unfold.im2col(gradOutput:contiguous(), self.columns, g)
  return self.columns
end

function SpatialFullConvolution:updateGradInput(input, gradOutput)
  if not self.gradInput then return end
  local x, target, g = self:_geometry(input)
  local cols = self:_gradColumns(gradOutput, g)
  local _, w = weights(self, self.weight:contiguous(), g.B, g.K)
  if not target and not torch.isTensor(self.gradInput) then self.gradInput = x.new() end
  local gi = target and (self._gradInput or x.new()) or self.gradInput
  gi:resizeAs(x)
  gi:view(g.B, self.nInputPlane, g.N):bmm(w, cols)
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
  local cols = self:_gradColumns(gradOutput, g)
  local gw = weights(self, self.gradWeight, g.B, g.K)
  gw:addbmm(scale or 1, x:contiguous():view(g.B, self.nInputPlane, g.N), cols:transpose(2, 3))
  if self.gradBias then
    planes.accSum(self.gradBias, gradOutput:contiguous(), g.B, g.C, g.H * g.W, scale or 1)
  end
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
