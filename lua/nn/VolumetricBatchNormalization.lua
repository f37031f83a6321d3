-- SpatialBatchNormalization for batch x planes x T x H x W input.
local BN = torch.class('nn.VolumetricBatchNormalization', 'nn.SpatialBatchNormalization')
BN.nDim = 5
