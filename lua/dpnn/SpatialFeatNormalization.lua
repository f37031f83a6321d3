-- Per-feature-plane normalization with fixed statistics: (input[f] - mean[f]) / std[f], for
-- nfeat x h x w or batch x nfeat x h x w inputs (e.g. colour channels of images).
local SpatialFeatNormalization, parent = torch.class('nn.SpatialFeatNormalization', 'nn.Module')

function SpatialFeatNormalization:__init(mean, std)
  parent.__init(self)
  if not torch.isTensor(mean) or mean:dim() ~= 1 then
    error('<SpatialFeatNormalization> Mean/Std should be 1D.', 2)
  end
  self.mean = torch.Tensor():resizeAs(mean):copy(mean)
  self.std = torch.Tensor():resizeAs(mean)
  if std ~= nil then self.std:copy(std) else self.std:fill(1) end
  self.noOfFeats = mean:size(1)
end

-- mean and std as views broadcastable over x's planes.
function SpatialFeatNormalization:_stats(x)
  local planeDim = x:dim() - 2
  if x:dim() ~= 3 and x:dim() ~= 4 then
    error(('<SpatialFeatNormalization> invalid input dims: expecting 3D or 4D, got %dD'):format(x:dim()), 3)
  end
  if x:size(planeDim) ~= self.noOfFeats then
    error(("<SpatialFeatNormalization> No. of Feats dont match: %d planes, %d means"):format(x:size(planeDim), self.noOfFeats), 3)
  end
  local shape = torch.LongStorage(x:dim()):fill(1)
  shape[planeDim] = self.noOfFeats
  return self.mean:type(x:type()):view(shape):expandAs(x), self.std:type(x:type()):view(shape):expandAs(x)
end

function SpatialFeatNormalization:updateOutput(input)
  local mean, std = self:_stats(input)
  self.output:resizeAs(input):copy(input):add(-1, mean):cdiv(std)
  return self.output
end

function SpatialFeatNormalization:updateGradInput(input, gradOutput)
  local _, std = self:_stats(gradOutput)
  self.gradInput:resizeAs(gradOutput):copy(gradOutput):cdiv(std)
  return self.gradInput
end
