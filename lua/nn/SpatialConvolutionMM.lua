-- SpatialConvolution with torch7's SpatialConvolutionMM weight layout: a 2D
-- nOutputPlane x (nInputPlane*kH*kW) matrix (the same memory order as the 4D weight).
local SpatialConvolutionMM, parent = torch.class('nn.SpatialConvolutionMM', 'nn.SpatialConvolution')
SpatialConvolutionMM._deviceKernel = true   -- the parent's CUDA passes serve this layout too

function SpatialConvolutionMM:__init(nInputPlane, nOutputPlane, kW, kH, dW, dH, padW, padH)
  parent.__init(self, nInputPlane, nOutputPlane, kW, kH, dW, dH, padW, padH)
  local K = nInputPlane * kH * kW
  self.weight = self.weight:view(nOutputPlane, K)
  self.gradWeight = self.gradWeight:view(nOutputPlane, K)
end
