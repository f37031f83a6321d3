-- A convolution whose filters are not shared: each output location (y, x) has its own
-- nOutputPlane x (nInputPlane*kH*kW) weight (weight: oH x oW x nOutputPlane x nInputPlane x kH
-- x kW, bias: nOutputPlane x oH x oW), for a fixed iW x iH input. The patches come from im2col;
-- the products are batched over locations (one GEMM per location, batch as columns).
local backend = require 'torch.backend'
local shape = require 'nn.util.shape'
local SpatialConvolutionLocal, parent = torch.class('nn.SpatialConvolutionLocal', 'nn.Module')
SpatialConvolutionLocal._deviceKernel = true   -- unfold's device im2col / col2im and batched products

function SpatialConvolutionLocal:__init(nInputPlane, nOutputPlane, iW, iH, kW, kH, dW, dH, padW, padH)
  parent.__init(self)
  self.nInputPlane, self.nOutputPlane = nInputPlane, nOutputPlane
  self.iW, self.iH, self.kW, self.kH = iW, iH, kW, kH
  self.dW, self.dH = dW or 1, dH or 1
  self.padW = padW or 0
  self.padH = padH or self.padW
  shape.positive(self, 'plane counts, input and kernel sizes and strides', nInputPlane, nOutputPlane,
    iW, iH, kW, kH, self.dW, self.dH)
  shape.nonNegative(self, 'paddings', self.padW, self.padH)
  self.oW = math.floor((2 * self.padW + iW - kW) / self.dW) + 1
  self.oH = math.floor((2 * self.padH + iH - kH) / self.dH) + 1
  if self.oW < 1 or self.oH < 1 then
    shape.fail(self, 'input %dx%d is too small for kernel %dx%d (padding %d,%d): the output would be %dx%d',
      iH, iW, kH, kW, self.padH, self.padW, self.oH, self.oW)
  end
  self.weight = torch.Tensor(self.oH, self.oW, nOutputPlane, nInputPlane, kH, kW)
  self.bias = torch.Tensor(nOutputPlane, self.oH, self.oW)
  self.gradWeight = torch.Tensor():resizeAs(self.weight)
  self.gradBias = torch.Tensor():resizeAs(self.bias)
  self:reset()
end

SpatialConvolutionLocal.reset = nn.SpatialConvolution.reset

function SpatialConvolutionLocal:_geometry(input)
  local batch, B, C, s = shape.input(self, input, 2, self.nInputPlane)
  if s[1] ~= self.iH or s[2] ~= self.iW then
    shape.fail(self, 'expected input planes of %dx%d, got %dx%d (input size %s)', self.iH, self.iW,
      s[1], s[2], table.concat(input:size():totable(), 'x'))
  end
  local oH, oW = self.oH, self.oW
  return { batch = batch, B = B, C = C, H = s[1], W = s[2], kH = self.kH, kW = self.kW,
    dH = self.dH, dW = self.dW, padH = self.padH, padW = self.padW, oH = oH, oW = oW,
    K = C * self.kH * self.kW, N = oH * oW,
    sizes = batch and { B, self.nOutputPlane, oH, oW } or { self.nOutputPlane, oH, oW } }
end

-- w (oH x oW x O x C x kH x kW, contiguous) as N x O x K
local function perLocation(self, w, g)
  if not w:isContiguous() then shape.fail(self, 'weight and gradWeight must be contiguous') end
  return w:view(g.N, self.nOutputPlane, g.K)
end

-- the patches of input as N x K x B (contiguous): the GEMMs' right-hand sides
function SpatialConvolutionLocal:_patches(input, g)
  self.finput = self.finput or input.new()
  self.finput:resize(g.B, g.K, g.N)
  input = input:contiguous()
  backend.of(input).im2col(input, self.finput, g)
  self._cols = self._cols or input.new()
  return self._cols:resize(g.N, g.K, g.B):copy(self.finput:permute(3, 2, 1))
end

function SpatialConvolutionLocal:updateOutput(input)
  local g = self:_geometry(input)
  local cols = self:_patches(input, g)
  self._out = self._out or input.new()
  self._out:resize(g.N, self.nOutputPlane, g.B):bmm(perLocation(self, self.weight:contiguous(), g), cols)
  self.output:resize(g.sizes)
  local out = self.output:view(g.B, self.nOutputPlane, g.N)
  out:copy(self._out:permute(3, 2, 1))
  out:add(self.bias:contiguous():view(1, self.nOutputPlane, g.N):expand(g.B, self.nOutputPlane, g.N))
  return self.output
end

-- gradOutput (checked) as N x O x B
function SpatialConvolutionLocal:_gradByLocation(gradOutput, g)
  shape.gradOutput(self, gradOutput, g.sizes)
  self._gout = self._gout or gradOutput.new()
  return self._gout:resize(g.N, self.nOutputPlane, g.B)
    :copy(gradOutput:contiguous():view(g.B, self.nOutputPlane, g.N):permute(3, 2, 1))
end

function SpatialConvolutionLocal:updateGradInput(input, gradOutput)
  if not self.gradInput then return end
  local g = self:_geometry(input)
  local gout = self:_gradByLocation(gradOutput, g)
  self._gcols = self._gcols or input.new()
  self._gcols:resize(g.N, g.K, g.B):bmm(perLocation(self, self.weight:contiguous(), g):transpose(2, 3), gout)
  self.fgradInput = self.fgradInput or input.new()
  self.fgradInput:resize(g.B, g.K, g.N):copy(self._gcols:permute(3, 2, 1))
  self.gradInput:resizeAs(input)
  backend.of(input).col2im(self.fgradInput, self.gradInput, g)
  return self.gradInput
end

-- Uses the patches of the last updateOutput (of this same input), as torch7.
function SpatialConvolutionLocal:accGradParameters(input, gradOutput, scale)
  local g = self:_geometry(input)
  local p = self._cols
  if not p or p:dim() ~= 3 or p:size(1) ~= g.N or p:size(3) ~= g.B then
    shape.fail(self, 'call updateOutput with this input before accGradParameters')
  end
  local gout = self:_gradByLocation(gradOutput, g)
  perLocation(self, self.gradWeight, g):baddbmm(1, scale or 1, gout, p:transpose(2, 3))
  self.gradBias:view(self.nOutputPlane, g.N):add(scale or 1, gout:sum(3):select(3, 1):t())
end

function SpatialConvolutionLocal:type(type, tensorCache)
  self.finput, self.fgradInput, self._cols, self._out, self._gout, self._gcols = nil, nil, nil, nil, nil, nil
  return parent.type(self, type, tensorCache)
end

function SpatialConvolutionLocal:__tostring__()
  local s = ('%s(%d -> %d, %dx%d, %dx%d'):format(torch.type(self), self.nInputPlane,
    self.nOutputPlane, self.iW, self.iH, self.kW, self.kH)
  if self.dW ~= 1 or self.dH ~= 1 or self.padW ~= 0 or self.padH ~= 0 then
    s = s .. (', %d,%d'):format(self.dW, self.dH)
  end
  if self.padW ~= 0 or self.padH ~= 0 then s = s .. (', %d,%d'):format(self.padW, self.padH) end
  return s .. ')'
end

function SpatialConvolutionLocal:clearState()
  return parent.clearState(self, 'finput', 'fgradInput', '_cols', '_out', '_gout', '_gcols')
end
