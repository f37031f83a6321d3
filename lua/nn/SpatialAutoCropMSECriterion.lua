-- MSECriterion between a (batch of) C x H x W input and the centre H x W crop of a target at
-- least as large in both spatial dims.
local check = require 'torch.core.check'
local SpatialAutoCropMSECriterion, parent =
  torch.class('nn.SpatialAutoCropMSECriterion', 'nn.MSECriterion')

function SpatialAutoCropMSECriterion:__init(sizeAverage)
  parent.__init(self, sizeAverage)
end

-- target's centre crop to input's spatial size, after checking the sizes.
local function cropped(self, input, target)
  local name = torch.type(self)
  check.tensorOf(name, input, 'input')
  check.tensorOf(name, target, 'target')
  local nd = input:dim()
  if (nd ~= 3 and nd ~= 4) or target:dim() ~= nd then
    check.error(('%s: input and target must both be 3-D or 4-D, got %s and %s'):format(
      name, check.sizestr(input), check.sizestr(target)))
  end
  for d = 1, nd - 2 do
    if input:size(d) ~= target:size(d) then
      check.error(('%s: input %s and target %s differ in %s'):format(name, check.sizestr(input),
        check.sizestr(target), (nd == 4 and d == 1) and 'batch size' or 'channels'))
    end
  end
  local h, w = input:size(nd - 1), input:size(nd)
  local th, tw = target:size(nd - 1), target:size(nd)
  if h > th or w > tw then
    check.error(('%s: the spatial resolution of input %s must not exceed that of target %s')
      :format(name, check.sizestr(input), check.sizestr(target)))
  end
  return target:narrow(nd - 1, 1 + math.floor((th - h) / 2), h)
    :narrow(nd, 1 + math.floor((tw - w) / 2), w)
end

function SpatialAutoCropMSECriterion:updateOutput(input, target)
  return parent.updateOutput(self, input, cropped(self, input, target))
end

function SpatialAutoCropMSECriterion:updateGradInput(input, target)
  return parent.updateGradInput(self, input, cropped(self, input, target))
end
