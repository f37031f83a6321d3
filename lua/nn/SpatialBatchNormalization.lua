-- Batch normalization of each plane of batch x planes x H x W input (y = (x - mean) / std *
-- weight + bias), with torch7's nn.BatchNormalization semantics: batch statistics in training
-- (a batch of one uses the running ones), running_mean/running_var updated with `momentum`,
-- running statistics in evaluation (where a single planes x H x W input is accepted), eps
-- added to the variance, affine = false for no weight and bias.
local batchnorm = require 'nn.kernels.batchnorm'
local shape = require 'nn.kernels.shape'

local BN, parent = torch.class('nn.SpatialBatchNormalization', 'nn.Module')
BN.__version = 2
BN.nDim = 4

function BN:__init(nOutput, eps, momentum, affine)
  parent.__init(self)
  if type(nOutput) ~= 'number' or nOutput < 1 then
    shape.fail(self, 'the number of planes must be a positive number, got %s', tostring(nOutput))
  end
  if affine ~= nil and type(affine) ~= 'boolean' then
    shape.fail(self, 'affine must be true or false, got %s', tostring(affine))
  end
  self.affine = affine ~= false
  self.eps = eps or 1e-5
  self.momentum = momentum or 0.1
  self.train = true
  self.running_mean = torch.zeros(nOutput)
  self.running_var = torch.ones(nOutput)
  if self.affine then
    self.weight = torch.Tensor(nOutput)
    self.bias = torch.Tensor(nOutput)
    self.gradWeight = torch.Tensor(nOutput)
    self.gradBias = torch.Tensor(nOutput)
  end
  self:reset()
end

function BN:reset()
  if self.weight then self.weight:uniform() end
  if self.bias then self.bias:zero() end
  self.running_mean:zero()
  self.running_var:fill(1)
end

-- Checks t (input or gradOutput) and returns it contiguous with the kernel's B, C, N.
function BN:_planes(t, name)
  if not torch.isTensor(t) then shape.fail(self, '%s must be a tensor, got %s', name, torch.type(t)) end
  local nd, want = t:dim(), self.nDim
  if nd ~= want and not (nd == want - 1 and self.train == false) then
    shape.fail(self, 'only mini-batch supported (%dD tensor), got %dD %s of size %s', want, nd,
      name, table.concat(t:size():totable(), 'x'))
  end
  local batch = nd == want
  local C = t:size(batch and 2 or 1)
  if C ~= self.running_mean:nElement() then
    shape.fail(self, 'got %d-feature %s of size %s, expected %d features', C, name,
      table.concat(t:size():totable(), 'x'), self.running_mean:nElement())
  end
  if t._dt ~= self.running_mean._dt then
    shape.fail(self, '%s is a %s but the module holds %s', name, torch.typename(t),
      torch.typename(self.running_mean))
  end
  return t:contiguous(), batch and t:size(1) or 1, C, t:nElement() / math.max(1, (batch and t:size(1) or 1) * C)
end

function BN:_state(B)
  return { running_mean = self.running_mean, running_var = self.running_var,
    save_mean = self.save_mean, save_std = self.save_std, weight = self.weight, bias = self.bias,
    train = self.train ~= false and B > 1, momentum = self.momentum, eps = self.eps }
end

function BN:updateOutput(input)
  local x, B, C, N = self:_planes(input, 'input')
  self.save_mean = self.save_mean or input.new()
  self.save_std = self.save_std or input.new()
  self.save_mean:resize(C)
  self.save_std:resize(C)
  self.output:resizeAs(input)
  batchnorm.forward(x, self.output, B, C, N, self:_state(B))
  return self.output
end

local function backward(self, input, gradOutput, scale, gradInput, gradWeight, gradBias)
  local x, B, C, N = self:_planes(input, 'input')
  if not gradOutput or not torch.isTensor(gradOutput) or not gradOutput:isSameSizeAs(input) then
    shape.fail(self, 'gradOutput of size %s does not match the input size %s',
      torch.isTensor(gradOutput) and table.concat(gradOutput:size():totable(), 'x') or torch.type(gradOutput),
      table.concat(input:size():totable(), 'x'))
  end
  if not self.save_mean then shape.fail(self, 'call updateOutput before the backward pass') end
  local g = self:_planes(gradOutput, 'gradOutput')
  if gradInput then gradInput:resizeAs(input) end
  batchnorm.backward(x, g, gradInput, B, C, N, self:_state(B), gradWeight, gradBias, scale or 1)
  return self.gradInput
end

function BN:backward(input, gradOutput, scale)
  return backward(self, input, gradOutput, scale, self.gradInput, self.gradWeight, self.gradBias)
end

function BN:updateGradInput(input, gradOutput)
  return backward(self, input, gradOutput, 1, self.gradInput)
end

function BN:accGradParameters(input, gradOutput, scale)
  backward(self, input, gradOutput, scale, nil, self.gradWeight, self.gradBias)
end

function BN:clearState()
  return parent.clearState(self, 'save_mean', 'save_std')
end

function BN:__tostring__()
  return ('%s (%dD) (%d)'):format(torch.type(self), self.nDim, self.running_mean:nElement())
end
