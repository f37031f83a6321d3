-- The CUDA op table's batch normalization passes (the CPU ones: backend/cpu/nn_batchnorm.lua).
local backend = require 'torch.backend'

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
})
