-- The CUDA op table's convolution, pooling, batch normalization and plane-mapping passes (the
-- CPU ones: lua/nn/kernels/conv.lua, pool.lua, batchnorm.lua; plane maps are CUDA only):
-- marshallers to the array module's code in luabridge/backend/cuda_nn.py, which takes the
-- output size and window geometry as numbers. Operands arrive checked, results sized.
local backend = require 'torch.backend'
local check = require 'torch.check'
local call = require('torch.backend.cuda.core').call

-- The output size and window geometry of a convolution (SpatialConvolution:_geometry's g).
local function convWindows(g)
  return g.oH, g.oW, g.kH, g.kW, g.dH, g.dW, g.padH, g.padW, g.dilationH, g.dilationW
end

-- The same of a transposed convolution: its input is the output of the convolution it reverses.
local function fullWindows(g)
  return g.oH, g.oW, g.kH, g.kW, g.dH, g.dW, g.padH, g.padW, 1, 1
end

-- The output size and window geometry of a 2D pooling (kernels/pool.lua's geometry); the
-- array module has no volumetric pooling.
local function poolWindows(g)
  local p = g.p
  if g.I[1] ~= 1 or p.k[1] ~= 1 then check.error('volumetric pooling is not available for CUDA tensors') end
  return g.O[2], g.O[3], p.k[2], p.k[3], p.d[2], p.d[3], p.pad[2], p.pad[3], p.dil[2], p.dil[3]
end

------------------------------------------------------------------------------------------------
-- Batch normalization (nn.BatchNormalization's passes) as tensor ops: x, g, out, gi are
-- n x c x s views; `self` is the module, whose fields hold the state and the scratch tensors.

-- Per-feature sums of t (n x c x s), as 1 x c x 1, into the buffer self[name].
local function featureSum(self, name, t)
  self[name] = self[name] or t.new()
  self._tmp = self._tmp or t.new()
  return torch.sum(self[name], torch.sum(self._tmp, t, 3), 1)
end

local function perFeature(t) return t:view(1, t:nElement(), 1) end

-- Whether this batch normalizes with its own statistics (the module's rule).
local function batchStats(self, x) return self:kernelState(x).train end

local device = {}

function device.forward(self, x, out)
  local m = x:size(1) * x:size(3)
  self._centered = self._centered or x.new()
  if batchStats(self, x) then
    local mean = featureSum(self, '_sum', x):div(m)
    local centered = self._centered:resizeAs(x):add(x, -1, mean:expandAs(x))
    self._tmp2 = self._tmp2 or x.new()
    local var = featureSum(self, '_var', self._tmp2:resizeAs(x):cmul(centered, centered)):div(m)
    self.running_mean:mul(1 - self.momentum):add(self.momentum, mean:view(-1))
    self.running_var:mul(1 - self.momentum):add(self.momentum * m / (m - 1), var:view(-1))
    self.save_mean:copy(mean)
    self.save_std:copy(var):add(self.eps):sqrt():pow(-1)
  else
    self.save_mean:copy(self.running_mean)
    self.save_std:copy(self.running_var):add(self.eps):sqrt():pow(-1)
  end
  -- out = (x - mean) * invstd * weight + bias
  out:add(x, -1, perFeature(self.save_mean):expandAs(x)):cmul(perFeature(self.save_std):expandAs(x))
  if self.weight then
    out:cmul(perFeature(self.weight):expandAs(x)):add(perFeature(self.bias):expandAs(x))
  end
end

-- The normalized input xhat = (x - save_mean) * save_std, into _centered.
local function normalized(self, x)
  return self._centered:resizeAs(x):add(x, -1, perFeature(self.save_mean):expandAs(x))
    :cmul(perFeature(self.save_std):expandAs(x))
end

function device.gradInput(self, x, g, gi)
  local m = x:size(1) * x:size(3)
  local scale = perFeature(self.save_std)
  if self.weight then
    self._scale = self._scale or x.new()
    scale = self._scale:resizeAs(scale):cmul(scale, perFeature(self.weight))
  end
  if batchStats(self, x) then
    -- (g - mean(g) - xhat * mean(g * xhat)) * invstd * weight
    local xhat = normalized(self, x)
    local meanG = featureSum(self, '_sum', g):div(m)
    self._tmp2 = self._tmp2 or x.new()
    local meanGX = featureSum(self, '_var', self._tmp2:resizeAs(x):cmul(g, xhat)):div(m)
    gi:cmul(xhat, meanGX:expandAs(x)):mul(-1):add(g):add(-1, meanG:expandAs(x))
    gi:cmul(scale:expandAs(x))
  else
    gi:cmul(g, scale:expandAs(x))
  end
end

function device.accGradParameters(self, x, g, gw, gb, scale)
  local xhat = normalized(self, x)
  self._tmp2 = self._tmp2 or x.new()
  gw:add(scale, featureSum(self, '_var', self._tmp2:resizeAs(x):cmul(g, xhat)):view(-1))
  gb:add(scale, featureSum(self, '_sum', g):view(-1))
end

backend.register('cuda', {
  batchnorm_forward = device.forward,
  -- gi, gw, gb (each may be nil): the input gradient; gw, gb += scale * the parameters'
  batchnorm_backward = function(self, x, g, gi, gw, gb, scale)
    if gi then device.gradInput(self, x, g, gi) end
    if gw then device.accGradParameters(self, x, g, gw, gb, scale) end
  end,
  spatial_conv_forward = function(_, g, output, input, weight, bias)
    call('conv_forward', output, input, weight, bias, convWindows(g))
  end,
  spatial_conv_grad_input = function(_, g, gradInput, gradOutput, weight)
    call('conv_grad_input', gradInput, gradOutput, weight, convWindows(g))
  end,
  spatial_conv_acc_grad = function(_, g, gradWeight, gradBias, input, gradOutput, scale)
    call('conv_acc_grad', gradWeight, gradBias, input, gradOutput, scale, convWindows(g))
  end,
  pool_max_forward = function(g, output, indices, input)
    call('max_pool_forward', output, indices, input, poolWindows(g))
  end,
  pool_max_backward = function(g, gradInput, gradOutput, indices)
    poolWindows(g)
    call('max_pool_backward', gradInput, gradOutput, indices)
  end,
  -- countPad: the divisor counts the padding; divide = false: the windows' sums
  pool_avg_forward = function(g, output, input, countPad, divide)
    local oH, oW, kH, kW, dH, dW, padH, padW = poolWindows(g)
    call('avg_pool_forward', output, input, oH, oW, countPad, divide, kH, kW, dH, dW, padH, padW, 1, 1)
  end,
  -- SpatialFullConvolution's g (its _geometry): oH, oW the input's size, H, W the output's
  spatial_full_conv_forward = function(g, output, input, weight, bias)
    call('full_conv_forward', output, input, weight, bias, fullWindows(g))
  end,
  spatial_full_conv_grad_input = function(g, gradInput, gradOutput, weight)
    call('conv_forward', gradInput, gradOutput, weight, nil, fullWindows(g))
  end,
  spatial_full_conv_acc_grad = function(g, gradWeight, gradBias, input, gradOutput, scale)
    call('full_conv_acc_grad', gradWeight, gradBias, input, gradOutput, scale, fullWindows(g))
  end,
  -- nn/kernels/unfold.lua's im2col / col2im of a batch of 2D images (B x K x N columns)
  im2col = function(col, img, ...) call('im2col', col, img, ...) end,
  col2im = function(img, col, keep, ...) call('col2im', img, col, keep, ...) end,
  -- out = x with its trailing dims mapped by host matrices (nn/kernels/planemaps.lua)
  plane_maps = function(out, x, backward, ...) call('plane_maps', out, x, backward, ...) end,
  adaptive_max_forward = function(output, indices, input, oH, oW)
    call('adaptive_max_forward', output, indices, input, oH, oW)
  end,
  -- indices: 1-based offsets in the planes (as max pooling's)
  adaptive_max_backward = function(gradInput, gradOutput, indices)
    call('max_pool_backward', gradInput, gradOutput, indices)
  end,
  pool_avg_backward = function(g, gradInput, gradOutput, countPad, divide)
    local oH, oW, kH, kW, dH, dW, padH, padW = poolWindows(g)
    call('avg_pool_backward', gradInput, gradOutput, oH, oW, countPad, divide, kH, kW, dH, dW, padH, padW, 1, 1)
  end,
})
