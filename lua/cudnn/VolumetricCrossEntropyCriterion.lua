-- cudnn.VolumetricCrossEntropyCriterion(weights): the cross-entropy of batch x classes x T x
-- H x W scores against batch x T x H x W class indices, by its scec (a
-- cudnn.SpatialCrossEntropyCriterion) with T and H folded into one dim.
local VolumetricCrossEntropyCriterion, parent = torch.class('cudnn.VolumetricCrossEntropyCriterion', 'nn.Criterion')

function VolumetricCrossEntropyCriterion:__init(weights)
  parent.__init(self)
  self.scec = cudnn.SpatialCrossEntropyCriterion(weights)
end

local function folded(self, input, target)
  self.scec.checkShapes(self, input, target, 3)
  local s = input:size()
  return input:contiguous():view(s[1], s[2], s[3] * s[4], s[5]),
         target:contiguous():view(s[1], s[3] * s[4], s[5])
end

function VolumetricCrossEntropyCriterion:updateOutput(input, target)
  self.output = self.scec:updateOutput(folded(self, input, target))
  return self.output
end

function VolumetricCrossEntropyCriterion:updateGradInput(input, target)
  self.gradInput = self.scec:updateGradInput(folded(self, input, target)):viewAs(input)
  return self.gradInput
end

function VolumetricCrossEntropyCriterion:type(name, cache)
  if name then self.scec:type(name, cache) end
  return parent.type(self, name, cache)
end
