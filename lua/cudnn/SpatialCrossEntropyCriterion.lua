-- cudnn.SpatialCrossEntropyCriterion(weights): the cross-entropy of batch x classes x H x W
-- scores against batch x H x W class indices: a log-softmax over the classes at each position
-- (slsm, a cudnn.SpatialLogSoftMax) then nn.SpatialClassNLLCriterion (nll), averaged over
-- the positions when sizeAverage.
local check = require 'torch.core.check'
local SpatialCrossEntropyCriterion, parent = torch.class('cudnn.SpatialCrossEntropyCriterion', 'nn.Criterion')

function SpatialCrossEntropyCriterion:__init(weights)
  parent.__init(self)
  self.slsm = cudnn.SpatialLogSoftMax()
  self.nll = nn.SpatialClassNLLCriterion(weights)
  self.sizeAverage = true
end

-- Checks a batch x classes x (spatial dims) input and a batch x (spatial dims) target for
-- the criterion `owner` (this class's and VolumetricCrossEntropyCriterion's).
function SpatialCrossEntropyCriterion.checkShapes(owner, input, target, spatial)
  local ok = torch.isTensor(input) and torch.isTensor(target) and input:dim() == spatial + 2
    and target:dim() == spatial + 1
  for d = 1, spatial + 1 do ok = ok and input:size(d == 1 and 1 or d + 1) == target:size(d) end
  if not ok then
    local dims = spatial == 2 and 'H x W' or 'T x H x W'
    check.error(('%s: expected a batch x classes x %s input and a batch x %s target, got %s and %s'):format(
      torch.type(owner), dims, dims, torch.isTensor(input) and check.sizestr(input) or torch.type(input),
      torch.isTensor(target) and check.sizestr(target) or torch.type(target)))
  end
end

function SpatialCrossEntropyCriterion:_check(input, target) self:checkShapes(input, target, 2) end

function SpatialCrossEntropyCriterion:updateOutput(input, target)
  self:_check(input, target)
  self.nll.sizeAverage = self.sizeAverage
  self.output = self.nll:updateOutput(self.slsm:updateOutput(input), target)
  return self.output
end

function SpatialCrossEntropyCriterion:updateGradInput(input, target)
  self:_check(input, target)
  self.nll.sizeAverage = self.sizeAverage
  self.gradInput = self.slsm:updateGradInput(input, self.nll:updateGradInput(self.slsm.output, target))
  return self.gradInput
end

function SpatialCrossEntropyCriterion:type(name, cache)
  if name then
    self.nll:type(name, cache)
    self.slsm:type(name, cache)
  end
  return parent.type(self, name, cache)
end
