-- The CUDA op table's convolution passes (the CPU ones: backend/cpu/nn_conv.lua; transposed
-- convolutions and im2col / col2im are CUDA only, the CPU modules unfold in their own loops):
-- marshallers to the array module's code in luabridge/backend/cuda_nn.py, which takes the output
-- size and window geometry as numbers. Operands arrive checked, results sized.
local backend = require 'torch.backend'
local check = require 'torch.core.check'
local call = require('torch.backend.cuda.core').call

-- The output size and window geometry of a convolution (SpatialConvolution:_geometry's g).
local function convWindows(g)
  return g.oH, g.oW, g.kH, g.kW, g.dH, g.dW, g.padH, g.padW, g.dilationH, g.dilationW
end

-- The same of a transposed convolution: its input is the output of the convolution it reverses.
local function fullWindows(g)
  return g.oH, g.oW, g.kH, g.kW, g.dH, g.dW, g.padH, g.padW, 1, 1
end

-- The window geometry of im2col / col2im's g (the unfolding modules' geometry).
local function unfoldWindows(g)
  return g.oH, g.oW, g.kH, g.kW, g.dH, g.dW, g.padH, g.padW, g.dilationH or 1, g.dilationW or 1
end

-- im2col / col2im take a whole batch of 2D images with no bias row; any other use says it is
-- not available.
local function wholeBatch(name, g, first, count, block)
  if (first or 0) ~= 0 or (count or g.B) ~= g.B or (block or 0) ~= 0 or g.colStride or (g.T or 1) ~= 1
      or (g.kT or 1) ~= 1 then
    check.error(name .. ': this geometry (3D, a part of the batch, or a bias row) is not available for CUDA tensors')
  end
end

backend.register('cuda', {
  spatial_conv_forward = function(_, g, output, input, weight, bias)
    call('conv_forward', output, input, weight, bias, convWindows(g))
  end,
  spatial_conv_grad_input = function(_, g, gradInput, gradOutput, weight)
    call('conv_grad_input', gradInput, gradOutput, weight, convWindows(g))
  end,
  spatial_conv_acc_grad = function(_, g, gradWeight, gradBias, input, gradOutput, scale)
    call('conv_acc_grad', gradWeight, gradBias, input, gradOutput, scale, convWindows(g))
  end,
  -- SpatialDepthWiseConvolution's oneDNN passes (backend/cpu/nn_conv.lua): none here, the
  -- module's own device im2col / col2im and batched products run
  spatial_depthwise_conv = function() return false end,
  -- SpatialFullConvolution's passes (the module, its _geometry g: oH, oW the input's size, H, W
  -- the output's)
  spatial_full_conv_forward = function(_, g, output, input, weight, bias)
    call('full_conv_forward', output, input, weight, bias, fullWindows(g))
  end,
  spatial_full_conv_grad_input = function(_, g, gradInput, gradOutput, weight)
    call('conv_forward', gradInput, gradOutput, weight, nil, fullWindows(g))
  end,
  spatial_full_conv_acc_grad = function(_, g, gradWeight, gradBias, input, gradOutput, scale)
    call('full_conv_acc_grad', gradWeight, gradBias, input, gradOutput, scale, fullWindows(g))
  end,
  -- backend/cpu/unfold.lua's im2col / col2im (the same arguments), on a whole batch of 2D
  -- images (B x K x N columns) only
  im2col = function(img, col, g, first, count, block)
    wholeBatch('im2col', g, first, count, block)
    call('im2col', col:view(g.B, -1, g.oH * g.oW), img:view(g.B, g.C, g.H, g.W), unfoldWindows(g))
  end,
  col2im = function(col, img, g, keep, first, count, block)
    wholeBatch('col2im', g, first, count, block)
    call('col2im', img:view(g.B, g.C, g.H, g.W), col:view(g.B, -1, g.oH * g.oW), keep or false, unfoldWindows(g))
  end,
})
