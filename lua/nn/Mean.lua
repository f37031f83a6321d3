-- The mean over dimension (a Sum with sizeAverage).
local Mean, parent = torch.class('nn.Mean', 'nn.Sum')

function Mean:__init(dimension, nInputDims, squeeze)
  parent.__init(self, dimension, nInputDims, true, squeeze)
end
