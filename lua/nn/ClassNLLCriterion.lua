-- Negative log-likelihood of 1-based class indices: input holds log-probabilities, one row per
-- sample (1-D: one sample); loss = -sum_i w[t_i] x[i][t_i], divided by sum_i w[t_i] when
-- sizeAverage. Samples whose target is ignoreIndex count for nothing.
local check = require 'torch.check'
local loss = require 'nn.kernels.loss'
local targets = require 'nn.kernels.targets'
local ClassNLLCriterion, parent = torch.class('nn.ClassNLLCriterion', 'nn.Criterion')

function ClassNLLCriterion:__init(weights, sizeAverage, ignoreIndex)
  parent.__init(self)
  self.sizeAverage = sizeAverage ~= false
  self.ignoreIndex = ignoreIndex or -100
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
  if t:nElement() ~= nframe then
    check.error(('%s: target size %s does not match input size %s (%d samples)'):format(
      name, check.sizestr(t), check.sizestr(input), nframe))
  end
  if self.weights and self.weights:nElement() ~= nclass then
    check.error(('%s: weights should be defined for all %d classes or none, got weights of size %s')
      :format(name, nclass, check.sizestr(self.weights)))
  end
  targets.checkRange(self, t, nframe, nclass, self.ignoreIndex)
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

function ClassNLLCriterion:updateOutput(input, target)
  local t, nframe = frames(self, input, target)
  local p, off, si, sc = targets.rows(input)
  local sum = 0
  for i = 0, nframe - 1 do
    local c = targets.at(t, i)
    if c ~= self.ignoreIndex then
      sum = sum - tonumber(p[off + i * si + (c - 1) * sc]) * targets.classWeight(self.weights, c)
    end
  end
  local total = totalWeight(self, t, nframe)
  if self.sizeAverage and total ~= 0 then sum = sum / total end
  self.output = sum
  self.output_tensor[1] = sum
  self.total_weight_tensor[1] = total
  return self.output, total
end

function ClassNLLCriterion:updateGradInput(input, target)
  local t, nframe = frames(self, input, target)
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
