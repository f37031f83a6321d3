-- inn.SpatialCrossResponseNormalization: nn.SpatialCrossMapLRN under imagine-nn's older name.
require 'inn.env'
torch.class('inn.SpatialCrossResponseNormalization', 'nn.SpatialCrossMapLRN')
