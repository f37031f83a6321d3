-- The cudnn layers that compute as their nn namesakes: subclasses of them (so that a
-- cudnn.SpatialMaxPooling is an nn.SpatialMaxPooling too), with cudnn.torch's constructors
-- where they take more (in-place activations, padded volumetric average pooling). The
-- fields cudnn.torch's files hold beside nn's are read by nn's upgrades (lua/nn/util/legacy.lua).
local check = require 'torch.core.check'
local tuning = require 'cudnn.tuning'

local function inplace(parentClass)
  return function(self, inplaceFlag)
    parentClass.__init(self)
    self.inplace = inplaceFlag or false
  end
end

-- name -> the nn class it derives from and its constructor when it is not the parent's
local layers = {
  SpatialFullConvolution = {}, VolumetricConvolution = {}, VolumetricFullConvolution = {},
  SpatialMaxPooling = {}, VolumetricMaxPooling = {},
  SpatialAveragePooling = {   -- cudnn's pooling steps by the kernel size by default (nn's by 1)
    init = function(self, kW, kH, dW, dH, padW, padH)
      nn.SpatialAveragePooling.__init(self, kW, kH, dW or kW, dH or kH, padW, padH)
    end,
  },
  VolumetricAveragePooling = {
    init = function(self, kT, kW, kH, dT, dW, dH, padT, padW, padH)
      nn.VolumetricAveragePooling.__init(self, kT, kW, kH, dT, dW, dH)
      self.padT, self.padW, self.padH = padT or 0, padW or 0, padH or 0
      self.ceil_mode, self.count_include_pad = false, true
    end,
  },
  ReLU = {}, Tanh = { init = inplace(nn.Tanh) }, Sigmoid = { init = inplace(nn.Sigmoid) },
  ClippedReLU = {
    parent = 'Clamp',
    init = function(self, ceiling, inplaceFlag)
      if type(ceiling) ~= 'number' then
        check.error('cudnn.ClippedReLU: no ceiling was given (cudnn.ClippedReLU(ceiling[, inplace]))')
      end
      nn.HardTanh.__init(self, 0, ceiling, inplaceFlag)
    end,
  },
  BatchNormalization = {}, SpatialBatchNormalization = {}, VolumetricBatchNormalization = {},
  SpatialCrossMapLRN = {},
}

for name, spec in pairs(layers) do
  local parentName = 'nn.' .. (spec.parent or name)
  local class = torch.class('cudnn.' .. name, parentName)
  class.__init = spec.init
  local parentClass = torch.getmetatable(parentName)
  if rawget(parentClass, '_deviceKernel') then class._deviceKernel = true end
  if name:match('Convolution$') then tuning(class) else class.clearDesc = function() end end
end

-- cudnn.torch's batch normalizations compute their parameter gradients together with gradInput, in
-- one cudnnBatchNormalizationBackward call: updateGradInput (scale 1 unless given) and backward both
-- accumulate scale * the gradients of weight and bias, and accGradParameters does nothing. Models
-- that share gradInput buffers between layers rely on it (fb.resnet.torch's -shareGradInput,
-- DenseNet's -optMemory: when a container calls accGradParameters, the buffer that held a batch
-- normalization's gradOutput holds another layer's gradInput by then).
for _, name in ipairs { 'BatchNormalization', 'SpatialBatchNormalization', 'VolumetricBatchNormalization' } do
  local class = torch.getmetatable('cudnn.' .. name)
  function class:updateGradInput(input, gradOutput, scale)
    return self:backward(input, gradOutput, scale)
  end
  function class:accGradParameters() end
end
