-- 2D convolution (cross-correlation) over planes x H x W (or batch x planes x H x W) input:
-- each image is unfolded into a K x N patch matrix (kernels/unfold.lua) and multiplied by the
-- nOutputPlane x K weight with one BLAS GEMM per image (baddbmm/addbmm over the batch).
local unfold = require 'nn.kernels.unfold'
local planes = require 'nn.kernels.planes'
local shape = require 'nn.kernels.shape'

local SpatialConvolution, parent = torch.class('nn.SpatialConvolution', 'nn.Module')

function SpatialConvolution:__init(nInputPlane, nOutputPlane, kW, kH, dW, dH, padW, padH)
  parent.__init(self)
  self.nInputPlane, self.nOutputPlane = nInputPlane, nOutputPlane
  self.kW, self.kH = kW, kH
  self.dW, self.dH = dW or 1, dH or 1
  self.padW = padW or 0
  self.padH = padH or self.padW
  shape.positive(self, 'plane counts, kernel sizes and strides', nInputPlane, nOutputPlane,
    kW, kH, self.dW, self.dH)
  self.weight = torch.Tensor(nOutputPlane, nInputPlane, kH, kW)
  self.bias = torch.Tensor(nOutputPlane)
  self.gradWeight = torch.Tensor(nOutputPlane, nInputPlane, kH, kW)
  self.gradBias = torch.Tensor(nOutputPlane)
  self:reset()
end

function SpatialConvolution:noBias()
  self.bias, self.gradBias = nil, nil
  return self
end

-- uniform in +-stdv * sqrt(3) when stdv is given, else +-1/sqrt(fan-in), as torch7
function SpatialConvolution:reset(stdv)
  stdv = stdv and stdv * math.sqrt(3) or 1 / math.sqrt(self.kW * self.kH * self.nInputPlane)
  self.weight:uniform(-stdv, stdv)
  if self.bias then self.bias:uniform(-stdv, stdv) end
end

-- Checks input against the module and returns the geometry the kernels take (the passes
-- below serve any module whose _geometry gives B, K, N and the output sizes).
function SpatialConvolution:_geometry(input)
  local batch, B, C, s = shape.input(self, input, 2, self.nInputPlane)
  local H, W = s[1], s[2]
  local kH, kW, dH, dW, padH, padW = self.kH, self.kW, self.dH, self.dW, self.padH, self.padW
  local lH, lW = self.dilationH or 1, self.dilationW or 1
  local oH = math.floor((H + 2 * padH - (lH * (kH - 1) + 1)) / dH) + 1
  local oW = math.floor((W + 2 * padW - (lW * (kW - 1) + 1)) / dW) + 1
  shape.output(self, input, { oH, oW }, ('kernel %dx%d, stride %d,%d, padding %d,%d%s'):format(
    kH, kW, dH, dW, padH, padW, self.dilationH and (', dilation %d,%d'):format(lH, lW) or ''))
  return { batch = batch, B = B, C = C, H = H, W = W, kH = kH, kW = kW, dH = dH, dW = dW,
    padH = padH, padW = padW, oH = oH, oW = oW, dilationH = lH, dilationW = lW,
    K = C * kH * kW, N = oH * oW,
    sizes = batch and { B, self.nOutputPlane, oH, oW } or { self.nOutputPlane, oH, oW } }
end

-- The weight (or gradWeight) as an nOutputPlane x K matrix sharing its memory.
local function matrix(self, w, name)
  if not w:isContiguous() then
    shape.fail(self, '%s must be contiguous', name)
  end
  return w:view(self.nOutputPlane, w:nElement() / self.nOutputPlane)
end

function SpatialConvolution:updateOutput(input)
  local g = self:_geometry(input)
  input = input:contiguous()
  self.finput = self.finput or input.new()
  self.finput:resize(g.B, g.K, g.N)
  unfold.im2col(input, self.finput, g)
  self.output:resize(g.sizes)
  local out = self.output:view(g.B, self.nOutputPlane, g.N)
  local beta = 0
  if self.bias then
    planes.fill(out, self.bias, g.B, self.nOutputPlane, g.N)
    beta = 1
  end
  local w = matrix(self, self.weight:contiguous(), 'weight')
  out:baddbmm(beta, out, 1, w:view(1, self.nOutputPlane, g.K):expand(g.B, self.nOutputPlane, g.K),
    self.finput)
  return self.output
end

function SpatialConvolution:updateGradInput(input, gradOutput)
  if not self.gradInput then return end
  local g = self:_geometry(input)
  shape.gradOutput(self, gradOutput, g.sizes)
  gradOutput = gradOutput:contiguous():view(g.B, self.nOutputPlane, g.N)
  self.fgradInput = self.fgradInput or input.new()
  self.fgradInput:resize(g.B, g.K, g.N)
  local w = matrix(self, self.weight:contiguous(), 'weight')
  local wt = w:view(1, self.nOutputPlane, g.K):expand(g.B, self.nOutputPlane, g.K):transpose(2, 3)
  self.fgradInput:bmm(wt, gradOutput)
  self.gradInput:resizeAs(input)
  if not self.gradInput:isContiguous() then self.gradInput = input.new():resizeAs(input) end
  unfold.col2im(self.fgradInput, self.gradInput, g)
  return self.gradInput
end

-- Uses the patches unfolded by the last updateOutput (of this same input), as torch7.
function SpatialConvolution:accGradParameters(input, gradOutput, scale)
  scale = scale or 1
  local g = self:_geometry(input)
  shape.gradOutput(self, gradOutput, g.sizes)
  gradOutput = gradOutput:contiguous():view(g.B, self.nOutputPlane, g.N)
  local f = self.finput
  if not f or f:dim() ~= 3 or f:size(1) ~= g.B or f:size(2) ~= g.K or f:size(3) ~= g.N then
    shape.fail(self, 'call updateOutput with this input before accGradParameters')
  end
  local gw = matrix(self, self.gradWeight, 'gradWeight')
  gw:addbmm(scale, gradOutput, f:transpose(2, 3))
  if self.gradBias then planes.accSum(self.gradBias, gradOutput, g.B, self.nOutputPlane, g.N, scale) end
end

function SpatialConvolution:type(type, tensorCache)
  self.finput = self.finput and torch.Tensor()
  self.fgradInput = self.fgradInput and torch.Tensor()
  return parent.type(self, type, tensorCache)
end

function SpatialConvolution:__tostring__()
  local s = ('%s(%d -> %d, %dx%d'):format(torch.type(self), self.nInputPlane, self.nOutputPlane,
    self.kW, self.kH)
  if self.dW ~= 1 or self.dH ~= 1 or self.padW ~= 0 or self.padH ~= 0 then
    s = s .. (', %d,%d'):format(self.dW, self.dH)
  end
  if self.padW ~= 0 or self.padH ~= 0 then s = s .. (', %d,%d'):format(self.padW, self.padH) end
  return s .. (self.bias and ')' or ') without bias')
end

function SpatialConvolution:clearState()
  return parent.clearState(self, 'finput', 'fgradInput')
end
