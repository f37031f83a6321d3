-- Depthwise 2D convolution: each of the nInputPlane planes is convolved on its own with
-- nOutputPlane (the channel multiplier) kH x kW kernels, giving nInputPlane * nOutputPlane
-- output planes ordered input plane major: output plane (i - 1) * nOutputPlane + j comes from
-- input plane i and kernel weight[j][i]. weight: nOutputPlane x (nInputPlane*kH*kW) (a
-- nOutputPlane x nInputPlane x kH x kW tensor is also accepted), bias: nOutputPlane x nInputPlane.
-- Each plane is unfolded as a one-plane image (backend/cpu/unfold.lua); one bmm over the input
-- planes per image; or, where the op table's spatial_depthwise_conv serves it (Float on
-- oneDNN, backend/cpu/nn_conv.lua), one grouped convolution per pass.
local backend = require 'torch.backend'
local shape = require 'nn.util.shape'

-- per module (kept off it: neither saved nor cloned): the geometry of the last forward that the
-- op table's spatial_depthwise_conv ran (accGradParameters then needs no patches)
local forwarded = setmetatable({}, { __mode = 'k' })

-- A SpatialConvolution (its fields, reset and noBias) with per-plane parameter shapes.
local DepthWise, parent = torch.class('nn.SpatialDepthWiseConvolution', 'nn.SpatialConvolution')
DepthWise._deviceKernel = true   -- unfold's device im2col / col2im and batched products

function DepthWise:__init(nInputPlane, nOutputPlane, kW, kH, dW, dH, padW, padH)
  parent.__init(self, nInputPlane, nOutputPlane, kW, kH, dW, dH, padW, padH)
  self.weight = torch.Tensor(nOutputPlane, nInputPlane * kH * kW)
  self.bias = torch.Tensor(nOutputPlane, nInputPlane)
  self.gradWeight = torch.Tensor(nOutputPlane, nInputPlane * kH * kW)
  self.gradBias = torch.Tensor(nOutputPlane, nInputPlane)
  self:reset()
end

-- SpatialConvolution's geometry, with each input plane unfolded as its own one-plane image
-- (g.B images of g.K = kH*kW rows); g.images is the batch size.
function DepthWise:_geometry(input)
  local n, m = self.nInputPlane, self.nOutputPlane
  local g = nn.SpatialConvolution._geometry(self, input)
  g.images, g.B, g.C, g.K = g.B, g.B * n, 1, g.kH * g.kW
  g.sizes = g.batch and { g.images, n * m, g.oH, g.oW } or { n * m, g.oH, g.oW }
  return g
end

-- A parameter (nOutputPlane x nInputPlane x rest) as nInputPlane x nOutputPlane x rest, contiguous.
function DepthWise:_perPlane(t, rest, name)
  local n, m = self.nInputPlane, self.nOutputPlane
  if t:nElement() ~= n * m * rest then
    shape.fail(self, '%s has %d elements, expected %d x %d x %d', name, t:nElement(), m, n, rest)
  end
  return t:contiguous():view(m, n, rest):transpose(1, 2):contiguous()
end

function DepthWise:updateOutput(input)
  local g = self:_geometry(input)
  local n, m = self.nInputPlane, self.nOutputPlane
  input = input:contiguous()
  if not self.output:isContiguous() then self.output = input.new() end
  self.output:resize(g.sizes)
  forwarded[self] = nil
  if backend.of(input).spatial_depthwise_conv('forward', self, g, self.output, input) then
    forwarded[self] = g
    return self.output
  end
  self.finput = self.finput or input.new()
  self.finput:resize(g.B, g.K, g.N)
  backend.of(input).im2col(input, self.finput, g)
  self.output:resize(g.sizes)
  local out = self.output:view(g.images, n, m, g.N)
  local w = self:_perPlane(self.weight, g.K, 'weight')
  local cols = self.finput:view(g.images, n, g.K, g.N)
  local b = self.bias and self:_perPlane(self.bias, 1, 'bias')
  for i = 1, g.images do
    if b then out[i]:copy(b:expand(n, m, g.N)) else out[i]:zero() end
    out[i]:baddbmm(1, out[i], 1, w, cols[i])
  end
  return self.output
end

function DepthWise:updateGradInput(input, gradOutput)
  if not self.gradInput then return end
  local g = self:_geometry(input)
  local n, m = self.nInputPlane, self.nOutputPlane
  shape.gradOutput(self, gradOutput, g.sizes)
  self.gradInput:resizeAs(input)
  if not self.gradInput:isContiguous() then self.gradInput = input.new():resizeAs(input) end
  if backend.of(input).spatial_depthwise_conv('gradInput', self, g, self.gradInput, gradOutput:contiguous()) then
    return self.gradInput
  end
  local go = gradOutput:contiguous():view(g.images, n, m, g.N)
  self.fgradInput = self.fgradInput or input.new()
  self.fgradInput:resize(g.B, g.K, g.N)
  local cols = self.fgradInput:view(g.images, n, g.K, g.N)
  local wt = self:_perPlane(self.weight, g.K, 'weight'):transpose(2, 3)
  for i = 1, g.images do cols[i]:bmm(wt, go[i]) end
  self.gradInput:resizeAs(input)
  if not self.gradInput:isContiguous() then self.gradInput = input.new():resizeAs(input) end
  backend.of(input).col2im(self.fgradInput, self.gradInput, g)
  return self.gradInput
end

-- Uses the patches unfolded by the last updateOutput (of this same input), as torch7.
function DepthWise:accGradParameters(input, gradOutput, scale)
  scale = scale or 1
  local g = self:_geometry(input)
  local n, m = self.nInputPlane, self.nOutputPlane
  shape.gradOutput(self, gradOutput, g.sizes)
  local done = forwarded[self]
  if done and done.images == g.images and done.H == g.H and done.W == g.W
      and backend.of(input).spatial_depthwise_conv('accGrad', self, g, input:contiguous(), gradOutput:contiguous(), scale) then
    return
  end
  local f = self.finput
  if not f or f:dim() ~= 3 or f:size(1) ~= g.B or f:size(2) ~= g.K or f:size(3) ~= g.N then
    shape.fail(self, 'call updateOutput with this input before accGradParameters')
  end
  local go = gradOutput:contiguous():view(g.images, n, m, g.N)
  local cols = f:view(g.images, n, g.K, g.N)
  self._gw = self._gw or input.new()
  self._gw:resize(n, m, g.K):zero()
  for i = 1, g.images do self._gw:baddbmm(1, self._gw, scale, go[i], cols[i]:transpose(2, 3)) end
  self.gradWeight:view(m, n, g.K):add(self._gw:transpose(1, 2))
  if self.gradBias then
    -- sum over images and positions, n x m, added as m x n
    local sums = go:sum(1):sum(4):view(n, m)
    self.gradBias:view(m, n):add(scale, sums:t())
  end
end

function DepthWise:type(type, tensorCache)
  self.finput = self.finput and torch.Tensor()
  self.fgradInput = self.fgradInput and torch.Tensor()
  return parent.type(self, type, tensorCache)
end

function DepthWise:__tostring__()
  return nn.SpatialConvolution.__tostring__(self)
end

function DepthWise:clearState()
  return parent.clearState(self, 'finput', 'fgradInput', '_gw', '_gb')
end
