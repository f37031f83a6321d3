-- 2D convolution (cross-correlation) over planes x H x W (or batch x planes x H x W) input:
-- each image is unfolded into a K x N patch matrix (backend/cpu/unfold.lua) and multiplied by the
-- nOutputPlane x K weight with one BLAS GEMM per image (backend/cpu/nn_conv.lua), or on oneDNN where
-- it is installed (backend/cpu/dnnl_nn.lua). The passes are the op table's (spatial_conv_*): CUDA
-- tensors run the array module's, after the same checks.
local check = require 'torch.core.check'
local backend = require 'torch.backend'
local apply = require 'torch.core.apply'
local sizesOf, dtypeOf = apply.sizes, require('torch.core.dtype').of
local shape = require 'nn.util.shape'

local SpatialConvolution, parent = torch.class('nn.SpatialConvolution', 'nn.Module')
SpatialConvolution._deviceKernel = true

function SpatialConvolution:__init(nInputPlane, nOutputPlane, kW, kH, dW, dH, padW, padH)
  parent.__init(self)
  self.nInputPlane, self.nOutputPlane = nInputPlane, nOutputPlane
  self.kW, self.kH = kW, kH
  self.dW, self.dH = dW or 1, dH or 1
  self.padW = padW or 0
  self.padH = padH or self.padW
  shape.positive(self, 'plane counts, kernel sizes and strides', nInputPlane, nOutputPlane,
    kW, kH, self.dW, self.dH)
  shape.nonNegative(self, 'paddings', self.padW, self.padH)
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

-- Per module (kept off it: neither saved nor cloned): the geometry of its last input, with the
-- values it was made for, and backend/cpu/nn_conv.lua's buffers.
local cache = setmetatable({}, { __mode = 'k' })

-- The module's cache entry and _geometry(input), reused while the input's type and sizes and
-- the module's settings are those it was made for (written out: no loop per call).
local function geometry(self, input)
  local e = cache[self]
  if not e then e = {}; cache[self] = e end
  if e.g and torch.isTensor(input) then
    local sz = sizesOf(input)
    if e.dt == dtypeOf(input) and e.wdt == dtypeOf(self.weight) and e.nd == #sz and e.s1 == sz[1]
        and e.s2 == sz[2] and e.s3 == sz[3] and e.s4 == sz[4] and e.s5 == sz[5] and e.nIn == self.nInputPlane
        and e.nOut == self.nOutputPlane and e.kW == self.kW and e.kH == self.kH and e.dW == self.dW
        and e.dH == self.dH and e.padW == self.padW and e.padH == self.padH
        and e.lW == self.dilationW and e.lH == self.dilationH and e.kT == self.kT and e.dT == self.dT
        and e.padT == self.padT and e.lT == self.dilationT then
      return e, e.g
    end
  end
  local g = self:_geometry(input)
  g.O, g.dt = self.nOutputPlane, dtypeOf(input)
  local sz = sizesOf(input)
  e.g, e.dt, e.wdt, e.nd, e.s1, e.s2, e.s3, e.s4 = g, dtypeOf(input), dtypeOf(self.weight), #sz, sz[1], sz[2], sz[3], sz[4]
  -- (the volumetric modules that share these passes: their fifth size and time settings)
  e.s5, e.kT, e.dT, e.padT, e.lT = sz[5], self.kT, self.dT, self.padT, self.dilationT
  e.nIn, e.nOut, e.kW, e.kH, e.dW, e.dH = self.nInputPlane, self.nOutputPlane, self.kW, self.kH, self.dW, self.dH
  e.padW, e.padH, e.lW, e.lH = self.padW, self.padH, self.dilationW, self.dilationH
  return e, g
end

-- A parameter (or its gradient) as a contiguous block of n elements of the input's type; a
-- copy when w is not contiguous and `copy`.
local function block(self, w, name, n, dt, copy)
  if dtypeOf(w) ~= dt then
    shape.fail(self, '%s is a %s, expected a %s', name, torch.typename(w), dt.name .. 'Tensor')
  end
  if copy and not apply.isContiguous(w) then w = w:contiguous() end
  if apply.numel(w) ~= n or not apply.isContiguous(w) then
    shape.fail(self, '%s must be contiguous with %d elements, got %s', name, n, check.sizestr(w))
  end
  return w
end

-- A bias (or its gradient): nil or a vector of nOutputPlane elements of the input's type.
local function vector(self, b, name, g)
  if b and (dtypeOf(b) ~= g.dt or b:dim() ~= 1 or b:size(1) ~= g.O) then
    shape.fail(self, '%s must be a %sTensor vector of %d elements, got %s of size %s', name,
      g.dt.name, g.O, torch.typename(b), check.sizestr(b))
  end
  return b
end

function SpatialConvolution:updateOutput(input)
  local e, g = geometry(self, input)
  input = input:contiguous()
  local weight = block(self, self.weight, 'weight', g.O * g.K, g.dt, true)
  local bias = vector(self, self.bias, 'bias', g)
  if not apply.isContiguous(self.output) then self.output = input.new() end
  shape.resize(self.output, g.sizes)
  backend.of(input).spatial_conv_forward(e, g, self.output, input, weight, bias)
  g.forwarded = true
  return self.output
end

function SpatialConvolution:updateGradInput(input, gradOutput)
  if not self.gradInput then return end
  local e, g = geometry(self, input)
  shape.gradOutput(self, gradOutput, g.sizes)
  self.gradInput:resizeAs(input)
  if not apply.isContiguous(self.gradInput) then self.gradInput = input.new():resizeAs(input) end
  local weight = block(self, self.weight, 'weight', g.O * g.K, g.dt, true)
  backend.of(input).spatial_conv_grad_input(e, g, self.gradInput, gradOutput:contiguous(), weight)
  return self.gradInput
end

-- Unfolds input again (the patches are not kept from updateOutput, see backend/cpu/nn_conv.lua); as
-- torch7, updateOutput must have run on an input of these sizes.
function SpatialConvolution:accGradParameters(input, gradOutput, scale)
  local e, g = geometry(self, input)
  if not g.forwarded then
    shape.fail(self, 'call updateOutput with this input before accGradParameters')
  end
  shape.gradOutput(self, gradOutput, g.sizes)
  local gw = block(self, self.gradWeight, 'gradWeight', g.O * g.K, g.dt)
  local gb = vector(self, self.gradBias, 'gradBias', g)
  backend.of(input).spatial_conv_acc_grad(e, g, gw, gb, input:contiguous(), gradOutput:contiguous(),
    scale or 1)
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
