-- ClassNLLCriterion at every pixel: input N x C x H x W log-probabilities, target N x H x W
-- 1-based class indices; loss = -sum w[t] x[n][t][h][w], divided by the total weight when
-- sizeAverage.
local check = require 'torch.core.check'
local loss = require 'nn.util.loss'
local targets = require 'nn.util.targets'
local backend = require 'torch.backend'
local SpatialClassNLLCriterion, parent = torch.class('nn.SpatialClassNLLCriterion', 'nn.Criterion')
SpatialClassNLLCriterion._deviceKernel = true   -- device input: ClassNLLCriterion's ops on the pixels

-- Device input as (N*H*W) x C rows of log-probabilities, and the target as their classes.
local function pixelRows(self, input, target)
  self._rows = self._rows or input.new()
  local n, c, h, w = input:size(1), input:size(2), input:size(3), input:size(4)
  self._rows:resize(n, h, w, c):copy(input:permute(1, 3, 4, 2))
  return self._rows:view(n * h * w, c), target:contiguous():view(n * h * w)
end

function SpatialClassNLLCriterion:__init(weights, sizeAverage)
  parent.__init(self)
  self.sizeAverage = sizeAverage ~= false
  self.weights = loss.checkWeights('nn.SpatialClassNLLCriterion', weights)
  self.output_tensor = torch.zeros(1)
  self.total_weight_tensor = torch.ones(1)
end

function SpatialClassNLLCriterion:__len()
  return self.weights and self.weights:nElement() or 0
end

local function validate(self, input, target)
  local name = torch.type(self)
  check.tensorOf(name, input, 'input')
  check.tensorOf(name, target, 'target')
  loss.checkHost(self, input)
  if input:dim() ~= 4 or target:dim() ~= 3 then
    check.error(('%s: expected a 4-D input (N x C x H x W) and a 3-D target (N x H x W), got %s and %s')
      :format(name, check.sizestr(input), check.sizestr(target)))
  end
  if input:size(1) ~= target:size(1) or input:size(3) ~= target:size(2)
     or input:size(4) ~= target:size(3) then
    check.error(('%s: size mismatch, input %s and target %s'):format(
      name, check.sizestr(input), check.sizestr(target)))
  end
  local nclass = input:size(2)
  targets.checkWeights(self, nclass)
  if target:nElement() > 0 then
    -- NaN-proof: a NaN target (min and max then give NaN) fails the test, as it must: it
    -- would become an address
    local lo, hi = target:min(), target:max()
    if not (lo >= 1 and hi < nclass + 1) then
      check.error(('%s: target out of range, expected class indices in [1, %d], got values in [%s, %s]')
        :format(name, nclass, tostring(lo), tostring(hi)))
    end
  end
end

-- One pass over the pixels: returns -sum w[t] x[t] and sum w[t]; with grad (sized as input
-- and zeroed), writes -w[t] at each pixel's target class.
local function pass(self, input, target, grad)
  local n, h, w = target:size(1), target:size(2), target:size(3)
  local ptr = backend.cpu.ptr
  local tp, ts1, ts2, ts3 = ptr(target), target:stride(1), target:stride(2), target:stride(3)
  local xp, xs1, xs2, xs3, xs4 = ptr(input), input:stride(1), input:stride(2), input:stride(3), input:stride(4)
  local gp = grad and ptr(grad)
  local gs1, gs2, gs3, gs4 = grad and grad:stride(1), grad and grad:stride(2), grad and grad:stride(3),
    grad and grad:stride(4)
  local sum, total = 0, 0
  for b = 0, n - 1 do
    for y = 0, h - 1 do
      for x = 0, w - 1 do
        local c = math.floor(tonumber(tp[b * ts1 + y * ts2 + x * ts3]))
        local wc = targets.classWeight(self.weights, c)
        total = total + wc
        sum = sum - tonumber(xp[b * xs1 + (c - 1) * xs2 + y * xs3 + x * xs4]) * wc
        if gp then gp[b * gs1 + (c - 1) * gs2 + y * gs3 + x * gs4] = -wc end
      end
    end
  end
  return sum, total
end

function SpatialClassNLLCriterion:updateOutput(input, target)
  validate(self, input, target)
  if backend.of(input) ~= backend.cpu then
    local rows, t = pixelRows(self, input, target)
    return targets.finish(self, backend.of(input).class_nll_forward(rows, t, self.weights, -1))
  end
  return targets.finish(self, pass(self, input, target))
end

function SpatialClassNLLCriterion:updateGradInput(input, target)
  validate(self, input, target)
  if backend.of(input) ~= backend.cpu then   -- the rows' gradient, permuted back
    local rows, t = pixelRows(self, input, target)
    backend.of(input).class_nll_backward(rows, t, self.weights, -1, self.sizeAverage)
    local n, c, h, w = input:size(1), input:size(2), input:size(3), input:size(4)
    return self.gradInput:resizeAs(input):copy(rows:view(n, h, w, c):permute(1, 4, 2, 3))
  end
  self.gradInput:resizeAs(input):zero()
  local _, total = pass(self, input, target, self.gradInput)
  -- as torch7: no gradient unless the total weight is positive
  if not (total > 0) then return self.gradInput:zero() end
  if self.sizeAverage then self.gradInput:div(total) end
  return self.gradInput
end
