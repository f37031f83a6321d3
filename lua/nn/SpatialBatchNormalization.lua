-- BatchNormalization of each plane of batch x planes x H x W input (a single planes x H x W
-- one in evaluation).
local BN = torch.class('nn.SpatialBatchNormalization', 'nn.BatchNormalization')
BN.nDim = 4
