-- Batch normalization (Ioffe & Szegedy 2015) over the features (dim 2) of a batch of nDim
-- dims (2 here: batch x features; subclasses set nDim = 4 or 5 for planes). Training
-- normalizes with the batch statistics and updates running_mean / running_var (unbiased)
-- with momentum; evaluation uses the running ones and also takes a single sample.
local check = require 'torch.check'
local BN, parent = torch.class('nn.BatchNormalization', 'nn.Module')

BN.__version = 2
BN.nDim = 2

function BN:__init(nOutput, eps, momentum, affine)
  parent.__init(self)
  assert(nOutput and type(nOutput) == 'number', 'Missing argument #1: dimensionality of input. ')
  assert(nOutput ~= 0, 'To set affine=false call BatchNormalization(nOutput,  eps, momentum, false) ')
  if affine ~= nil then
    assert(type(affine) == 'boolean', 'affine has to be true/false')
    self.affine = affine
  else
    self.affine = true
  end
  self.eps = eps or 1e-5
  self.train = true
  self.momentum = momentum or 0.1
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
    check.error(('%s: only mini-batch supported (%dD tensor), got %dD tensor instead'):format(
      torch.type(self), self.nDim, nd))
  end
  local featDim = nd == self.nDim - 1 and 1 or 2
  if input:size(featDim) ~= self.running_mean:nElement() then
    check.error(('%s: got %d-feature tensor, expected %d'):format(torch.type(self),
      input:size(featDim), self.running_mean:nElement()))
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
  return t:view(n, c, t:nElement() / (n * c))
end

-- Per-feature sums of t (n x c x s), as 1 x c x 1, into the buffer m[name].
local function featureSum(self, name, t)
  self[name] = self[name] or t.new()
  self._tmp = self._tmp or t.new()
  return torch.sum(self[name], torch.sum(self._tmp, t, 3), 1)
end

local function perFeature(t) return t:view(1, t:nElement(), 1) end

function BN:updateOutput(input)
  self:checkInputDim(input)
  local x = threeD(self, '_input', input, input)
  local m = x:size(1) * x:size(3)
  self.save_mean = self.save_mean or x.new()
  self.save_std = self.save_std or x.new()   -- 1 / sqrt(var + eps)
  self._centered = self._centered or x.new()
  local mean, invstd
  if self.train then
    mean = featureSum(self, '_sum', x):div(m)
    local centered = self._centered:resizeAs(x):add(x, -1, mean:expandAs(x))
    self._tmp2 = self._tmp2 or x.new()
    local var = featureSum(self, '_var', self._tmp2:resizeAs(x):cmul(centered, centered)):div(m)
    self.running_mean:mul(1 - self.momentum):add(self.momentum, mean:view(-1))
    self.running_var:mul(1 - self.momentum):add(self.momentum * m / math.max(m - 1, 1), var:view(-1))
    self.save_mean:resizeAs(self.running_mean):copy(mean)
    self.save_std:resizeAs(self.running_var):copy(var):add(self.eps):sqrt():pow(-1)
  else
    self.save_mean:resizeAs(self.running_mean):copy(self.running_mean)
    self.save_std:resizeAs(self.running_var):copy(self.running_var):add(self.eps):sqrt():pow(-1)
  end
  mean, invstd = perFeature(self.save_mean), perFeature(self.save_std)
  -- output = (x - mean) * invstd * weight + bias
  self.output:resizeAs(input)
  local out = self.output:view(x:size())
  out:add(x, -1, mean:expandAs(x)):cmul(invstd:expandAs(x))
  if self.weight then
    out:cmul(perFeature(self.weight):expandAs(x)):add(perFeature(self.bias):expandAs(x))
  end
  return self.output
end

-- The normalized input xhat = (x - save_mean) * save_std, into _centered.
local function normalized(self, x)
  return self._centered:resizeAs(x):add(x, -1, perFeature(self.save_mean):expandAs(x))
    :cmul(perFeature(self.save_std):expandAs(x))
end

function BN:updateGradInput(input, gradOutput)
  self:checkInputDim(input)
  if not gradOutput:isSameSizeAs(input) then
    check.error(('%s: gradOutput size %s does not match input size %s'):format(torch.type(self),
      check.sizestr(gradOutput), check.sizestr(input)))
  end
  local x = threeD(self, '_input', input, input)
  local g = threeD(self, '_gradOutput', gradOutput, input)
  local m = x:size(1) * x:size(3)
  local scale = perFeature(self.save_std)
  if self.weight then
    self._scale = self._scale or x.new()
    scale = self._scale:resizeAs(scale):cmul(scale, perFeature(self.weight))
  end
  self.gradInput:resizeAs(input)
  local gi = self.gradInput:view(x:size())
  if self.train then
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
  return self.gradInput
end

function BN:accGradParameters(input, gradOutput, scale)
  if not self.weight then return end
  scale = scale or 1
  local x = threeD(self, '_input', input, input)
  local g = threeD(self, '_gradOutput', gradOutput, input)
  local xhat = normalized(self, x)
  self._tmp2 = self._tmp2 or x.new()
  self.gradWeight:add(scale, featureSum(self, '_var', self._tmp2:resizeAs(x):cmul(g, xhat)):view(-1))
  self.gradBias:add(scale, featureSum(self, '_sum', g):view(-1))
end

function BN:clearState()
  return parent.clearState(self, '_input', '_gradOutput', '_sum', '_var', '_tmp', '_tmp2',
    '_centered', '_scale')
end
