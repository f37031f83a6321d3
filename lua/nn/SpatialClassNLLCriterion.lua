-- ClassNLLCriterion at every pixel: input N x C x H x W log-probabilities, target N x H x W
-- 1-based class indices; loss = -sum w[t] x[n][t][h][w], divided by the total weight when
-- sizeAverage.
local check = require 'torch.core.check'
local loss = require 'nn.util.loss'
local targets = require 'nn.util.targets'
local backend = require 'torch.backend'
local SpatialClassNLLCriterion, parent = torch.class('nn.SpatialClassNLLCriterion', 'nn.Criterion')
SpatialClassNLLCriterion._deviceKernel = true   -- device input: ClassNLLCriterion's ops on the pixels (nn_loss)

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

function SpatialClassNLLCriterion:updateOutput(input, target)
  validate(self, input, target)
  return targets.finish(self, backend.of(input).spatial_class_nll_forward(self, input, target, self.weights))
end

function SpatialClassNLLCriterion:updateGradInput(input, target)
  validate(self, input, target)
  backend.of(input).spatial_class_nll_backward(self, self.gradInput, input, target, self.weights, self.sizeAverage)
  return self.gradInput
end
