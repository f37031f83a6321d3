-- Negative log-likelihood of 1-based class indices: input holds log-probabilities, one row per
-- sample (1-D: one sample); loss = -sum_i w[t_i] x[i][t_i], divided by sum_i w[t_i] when
-- sizeAverage. Samples whose target is ignoreIndex count for nothing. CUDA input runs the array
-- module's passes (luabridge/backend/cuda_nn.py); its target is checked through a host copy.
local check = require 'torch.check'
local cuda = require 'torch.backend.cuda'
local loss = require 'nn.kernels.loss'
local targets = require 'nn.kernels.targets'
local ClassNLLCriterion, parent = torch.class('nn.ClassNLLCriterion', 'nn.Criterion')
ClassNLLCriterion._deviceKernel = true

function ClassNLLCriterion:__init(weights, sizeAverage, ignoreIndex)
  parent.__init(self)
  self.sizeAverage = sizeAverage ~= false
  self.ignoreIndex = check.optNumber('nn.ClassNLLCriterion', ignoreIndex, 'ignoreIndex') or -100
  self.weights = loss.checkWeights('nn.ClassNLLCriterion', weights)
  self.output_tensor = torch.zeros(1)
  self.total_weight_tensor = torch.ones(1)
end

function ClassNLLCriterion:__len()
  return self.weights and self.weights:nElement() or 0
end

-- Validates; returns the target tensor and the sample count.
local function frames(self, input, target)
  local name = torch.type(self)
  local nframe, nclass = targets.frames(self, input)
  local t = targets.tensor(self, target)
  if t:dim() > 1 then
    check.error(('%s: multi-target not supported, target must be 1-D, got %s'):format(
      name, check.sizestr(t)))
  end
  if input:dim() == 1 and t:nElement() > 1 then
    t = t:narrow(1, 1, 1)   -- one sample: torch7 read the target's first element, whatever its size
  elseif t:nElement() ~= nframe then
    check.error(('%s: target size %s does not match input size %s (%d samples)'):format(
      name, check.sizestr(t), check.sizestr(input), nframe))
  end
  targets.checkWeights(self, nclass)
  targets.checkRange(self, t._device and t:double() or t, nframe, nclass, self.ignoreIndex)
  return t, nframe
end

local function totalWeight(self, t, nframe)
  local total = 0
  for i = 0, nframe - 1 do
    local c = targets.at(t, i)
    if c ~= self.ignoreIndex then total = total + targets.classWeight(self.weights, c) end
  end
  return total
end

local finish = targets.finish

function ClassNLLCriterion:updateOutput(input, target)
  local t, nframe = frames(self, input, target)
  if input._device then
    return finish(self, cuda.call('class_nll_forward', input, t, self.weights, self.ignoreIndex))
  end
  local p, off, si, sc = targets.rows(input)
  local sum = 0
  for i = 0, nframe - 1 do
    local c = targets.at(t, i)
    if c ~= self.ignoreIndex then
      sum = sum - tonumber(p[off + i * si + (c - 1) * sc]) * targets.classWeight(self.weights, c)
    end
  end
  return finish(self, sum, totalWeight(self, t, nframe))
end

function ClassNLLCriterion:updateGradInput(input, target)
  local t, nframe = frames(self, input, target)
  if input._device then
    self.gradInput:resizeAs(input)
    cuda.call('class_nll_backward', self.gradInput, t, self.weights, self.ignoreIndex, self.sizeAverage)
    return self.gradInput
  end
  self.gradInput:resizeAs(input):zero()
  local total = totalWeight(self, t, nframe)
  -- as torch7: no gradient unless the total weight is positive
  if not (total > 0) then return self.gradInput end
  local norm = self.sizeAverage and total or 1
  local p, off, si, sc = targets.rows(self.gradInput)
  for i = 0, nframe - 1 do
    local c = targets.at(t, i)
    if c ~= self.ignoreIndex then
      p[off + i * si + (c - 1) * sc] = -targets.classWeight(self.weights, c) / norm
    end
  end
  return self.gradInput
end
