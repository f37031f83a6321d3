-- A Linear layer trained in weight-normalized form: each weight row is g_i * v_i / ||v_i||
-- (||v_i|| clamped to at least eps); v (outputSize x inputSize), g (outputSize x 1) and the
-- bias are the parameters.
local check = require 'torch.core.check'
local LinearWeightNorm, parent = torch.class('nn.LinearWeightNorm', 'nn.Linear')

function LinearWeightNorm:__init(inputSize, outputSize, bias, eps)
  nn.Module.__init(self)
  self.inputSize = check.int('nn.LinearWeightNorm', inputSize, 'inputSize', 0)
  self.outputSize = check.int('nn.LinearWeightNorm', outputSize, 'outputSize', 0)
  self.eps = check.optNumber('nn.LinearWeightNorm', eps, 'eps') or 1e-16
  self.weight = torch.Tensor(outputSize, inputSize)
  self.v = torch.Tensor(outputSize, inputSize)
  self.gradV = torch.Tensor(outputSize, inputSize)
  self.g = torch.Tensor(outputSize, 1)
  self.gradG = torch.Tensor(outputSize, 1)
  self.norm = torch.Tensor(outputSize, 1)
  self.scale = torch.Tensor(outputSize, 1)
  if bias ~= false then
    self.bias = torch.Tensor(outputSize)
    self.gradBias = torch.Tensor(outputSize)
  end
  self:reset()
end

-- v = weight, g = the row norms of weight: the layer then computes exactly that weight.
function LinearWeightNorm:initFromWeight(weight)
  weight = weight or self.weight
  self.g:norm(weight, 2, 2):clamp(self.eps, math.huge)
  self.v:copy(weight)
  return self
end

function LinearWeightNorm.fromLinear(linear)
  local module = nn.LinearWeightNorm(linear.weight:size(2), linear.weight:size(1), torch.isTensor(linear.bias))
  module.weight:copy(linear.weight)
  module:initFromWeight()
  if linear.bias then module.bias:copy(linear.bias) end
  return module
end

function LinearWeightNorm:toLinear()
  self:updateWeightMatrix()
  local module = nn.Linear(self.inputSize, self.outputSize, torch.isTensor(self.bias))
  module.weight:copy(self.weight)
  if self.bias then module.bias:copy(self.bias) end
  return module
end

function LinearWeightNorm:reset(stdv)
  stdv = stdv and stdv * math.sqrt(3) or 1 / math.sqrt(self.inputSize)
  self.weight:uniform(-stdv, stdv)
  self:initFromWeight()
  if self.bias then self.bias:uniform(-stdv, stdv) end
  return self
end

function LinearWeightNorm:parameters()
  if self.bias then return { self.v, self.g, self.bias }, { self.gradV, self.gradG, self.gradBias } end
  return { self.v, self.g }, { self.gradV, self.gradG }
end

-- weight = v * g / ||v|| row by row
function LinearWeightNorm:updateWeightMatrix()
  self.norm:resizeAs(self.g):norm(self.v, 2, 2):clamp(self.eps, math.huge)
  self.scale:resizeAs(self.g):cdiv(self.g, self.norm)
  self.weight:resizeAs(self.v):cmul(self.v, self.scale:expandAs(self.v))
end

function LinearWeightNorm:updateOutput(input)
  if self.train ~= false then self:updateWeightMatrix() end
  return parent.updateOutput(self, input)
end

function LinearWeightNorm:evaluate()
  if self.train ~= false then self:updateWeightMatrix() end
  parent.evaluate(self)
end

-- With G = scale * dL/dweight for this input:
--   gradG += sum_j G_ij v_ij / ||v_i||,  gradV += (g_i / ||v_i||) (G_i - (that gradG step / ||v_i||) v_i)
function LinearWeightNorm:accGradParameters(input, gradOutput, scale)
  scale = scale or 1
  local nd = torch.isTensor(input) and input:dim() or 0
  if (nd ~= 1 and nd ~= 2) or not torch.isTensor(gradOutput) or gradOutput:dim() ~= nd
      or input:size(nd) ~= self.inputSize or gradOutput:size(nd) ~= self.outputSize
      or (nd == 2 and input:size(1) ~= gradOutput:size(1)) then
    check.error(('nn.LinearWeightNorm: input %s and gradOutput %s do not fit a %d -> %d layer'):format(
      torch.isTensor(input) and check.sizestr(input) or torch.type(input),
      torch.isTensor(gradOutput) and check.sizestr(gradOutput) or torch.type(gradOutput),
      self.inputSize, self.outputSize))
  end
  local go = nd == 1 and gradOutput:view(1, self.outputSize) or gradOutput
  local x = nd == 1 and input:view(1, self.inputSize) or input
  self._gw = self._gw or self.v.new()
  self._gw:resizeAs(self.v):mm(go:t(), x):mul(scale)
  if self.bias then self.gradBias:add(scale, go:sum(1):view(self.outputSize)) end
  local norm, rowScale = self.norm:expandAs(self.v), self.scale:expandAs(self.v)
  self._tmp = self._tmp or self.v.new()
  self._step = self._step or self.v.new()
  self._step:sum(self._tmp:resizeAs(self.v):cmul(self._gw, self.v):cdiv(norm), 2)
  self.gradG:add(self._step)
  self._tmp:cmul(self.v, rowScale):cdiv(norm):cmul(self._step:expandAs(self.v))
  self.gradV:add(self._gw:cmul(rowScale)):add(-1, self._tmp)
end

-- Shared weights: v, g, bias updated in place by -lr times this input's gradients.
function LinearWeightNorm:defaultAccUpdateGradParameters(input, gradOutput, lr)
  local gradV, gradG, gradBias = self.gradV, self.gradG, self.gradBias
  self.gradV, self.gradG, self.gradBias = self.v, self.g, self.bias
  self:accGradParameters(input, gradOutput, -lr)
  self.gradV, self.gradG, self.gradBias = gradV, gradG, gradBias
end

function LinearWeightNorm:clearState()
  nn.utils.clear(self, 'weight', 'norm', 'scale', '_gw', '_tmp', '_step')
  return parent.clearState(self)
end

function LinearWeightNorm:__tostring__()
  return ('%s(%d -> %d)%s'):format(torch.type(self), self.inputSize, self.outputSize,
    self.bias and '' or ' without bias')
end
