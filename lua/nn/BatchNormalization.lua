-- Batch normalization (Ioffe & Szegedy 2015) over the features (dim 2) of a batch of nDim
-- dims (2 here: batch x features; Spatial/VolumetricBatchNormalization set nDim = 4 or 5 for
-- planes). Training normalizes with the batch statistics and updates running_mean /
-- running_var (unbiased) with momentum; evaluation, and as in torch7 a training batch of one,
-- use the running ones. Evaluation also takes a single sample (nDim - 1 dims).
-- The passes are the op table's (batchnorm_forward, batchnorm_backward): CPU tensors run the
-- loops of backend/cpu/nn_batchnorm.lua (or oneDNN), CUDA ones tensor ops (backend/cuda/nn_batchnorm.lua).
local check = require 'torch.core.check'
local backend = require 'torch.backend'
local BN, parent = torch.class('nn.BatchNormalization', 'nn.Module')

BN.__version = 2
BN.nDim = 2

local function fail(self, fmt, ...)
  check.error(torch.type(self) .. ': ' .. fmt:format(...))
end

function BN:__init(nOutput, eps, momentum, affine)
  parent.__init(self)
  check.int(torch.type(self), nOutput, 'nOutput (the number of features)', 1)
  if affine ~= nil and type(affine) ~= 'boolean' then
    fail(self, 'affine must be true or false, got %s', tostring(affine))
  end
  self.affine = affine ~= false
  -- torch7 reads `eps or 1e-5` and `momentum or 0.1`: false is the default as nil is
  -- (XNOR-Net passes (n, eps, false) meaning affine = false, which torch7 read as momentum)
  if eps == false then eps = nil end
  if momentum == false then momentum = nil end
  self.eps = check.optNumber(torch.type(self), eps, 'eps') or 1e-5
  self.train = true
  self.momentum = check.optNumber(torch.type(self), momentum, 'momentum') or 0.1
  self.running_mean = torch.zeros(nOutput)
  self.running_var = torch.ones(nOutput)
  if self.affine then
    self.weight = torch.Tensor(nOutput)
    self.bias = torch.Tensor(nOutput)
    self.gradWeight = torch.Tensor(nOutput)
    self.gradBias = torch.Tensor(nOutput)
    self:reset()
  end
end

function BN:reset()
  if self.weight then self.weight:uniform() end
  if self.bias then self.bias:zero() end
  self.running_mean:zero()
  self.running_var:fill(1)
end

function BN:checkInputDim(input)
  check.tensorOf(torch.type(self), input, 'input')
  local nd = input:dim()
  if nd ~= self.nDim and not (nd == self.nDim - 1 and self.train == false) then
    fail(self, 'only mini-batch supported (%dD tensor), got %dD tensor instead (input of size %s)',
      self.nDim, nd, check.sizestr(input))
  end
  local featDim = nd == self.nDim - 1 and 1 or 2
  if input:size(featDim) ~= self.running_mean:nElement() then
    fail(self, 'got %d-feature tensor, expected %d (input of size %s)', input:size(featDim),
      self.running_mean:nElement(), check.sizestr(input))
  end
  if input:nElement() == 0 then fail(self, 'input of size %s has no elements', check.sizestr(input)) end
  if input:type() ~= self.running_mean:type() then
    fail(self, 'input is a %s but the module holds %s', input:type(), self.running_mean:type())
  end
end

-- t (contiguous) as batch x features x positions.
local function threeD(self, name, t, input)
  if not t:isContiguous() then
    self[name] = self[name] or t.new()
    t = self[name]:resizeAs(t):copy(t)
  end
  local c = self.running_mean:nElement()
  local n = input:dim() == self.nDim - 1 and 1 or input:size(1)
  return t:view(n, c, t:nElement() / math.max(1, n * c))
end

-- Whether this batch normalizes with its own statistics (a batch of one cannot).
local function batchStats(self, x) return self.train ~= false and x:size(1) > 1 end

-- The fields the passes read; train: whether the batch's own statistics normalize it.
function BN:kernelState(x)
  return { running_mean = self.running_mean, running_var = self.running_var,
    save_mean = self.save_mean, save_std = self.save_std, weight = self.weight, bias = self.bias,
    train = batchStats(self, x), momentum = self.momentum, eps = self.eps }
end

function BN:updateOutput(input)
  self:checkInputDim(input)
  local x = threeD(self, '_input', input, input)
  self.save_mean = (self.save_mean or x.new()):resizeAs(self.running_mean)
  self.save_std = (self.save_std or x.new()):resizeAs(self.running_var)  -- 1 / sqrt(var + eps)
  self.output:resizeAs(input)
  backend.of(x).batchnorm_forward(self, x, self.output:view(x:size()))
  return self.output
end

-- input and gradOutput checked, as n x c x s views.
function BN:gradViews(input, gradOutput)
  self:checkInputDim(input)
  if not torch.isTensor(gradOutput) or not gradOutput:isSameSizeAs(input) then
    fail(self, 'gradOutput size %s does not match input size %s',
      torch.isTensor(gradOutput) and check.sizestr(gradOutput) or torch.type(gradOutput),
      check.sizestr(input))
  end
  if not self.save_mean or self.save_mean:nElement() ~= self.running_mean:nElement() then
    fail(self, 'call updateOutput before the backward pass')
  end
  return threeD(self, '_input', input, input), threeD(self, '_gradOutput', gradOutput, input)
end

function BN:updateGradInput(input, gradOutput)
  local x, g = self:gradViews(input, gradOutput)
  self.gradInput:resizeAs(input)
  backend.of(x).batchnorm_backward(self, x, g, self.gradInput:view(x:size()), nil, nil, 1)
  return self.gradInput
end

function BN:accGradParameters(input, gradOutput, scale)
  if not self.weight then return end
  local x, g = self:gradViews(input, gradOutput)
  backend.of(x).batchnorm_backward(self, x, g, nil, self.gradWeight, self.gradBias, scale or 1)
end

-- One pass computes gradInput and the parameter gradients together.
function BN:backward(input, gradOutput, scale)
  local x, g = self:gradViews(input, gradOutput)
  self.gradInput:resizeAs(input)
  backend.of(x).batchnorm_backward(self, x, g, self.gradInput:view(x:size()), self.gradWeight,
    self.gradBias, scale or 1)
  return self.gradInput
end

function BN:clearState()
  return parent.clearState(self, '_input', '_gradOutput', '_sum', '_var', '_tmp', '_tmp2',
    '_centered', '_scale', 'save_mean', 'save_std')
end

function BN:__tostring__()
  return ('%s (%dD) (%d)'):format(torch.type(self), self.nDim, self.running_mean:nElement())
end
