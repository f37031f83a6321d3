-- Fractional max pooling of planes x H x W x T (or batch x planes x H x W x T) inputs with
-- poolSizeT x poolSizeW x poolSizeH windows: outT x outW x outH outputs, or reduction ratios in
-- (0, 1). The pooling itself is SpatialFractionalMaxPooling's over three dimensions.
local Pooling, parent = torch.class('nn.VolumetricFractionalMaxPooling', 'nn.SpatialFractionalMaxPooling')

Pooling.dims = { 'H', 'W', 'T' }
Pooling.sampleOf = { 3, 2, 1 }

function Pooling:__init(poolSizeT, poolSizeW, poolSizeH, arg1, arg2, arg3)
  nn.Module.__init(self)
  self:_setup({ H = poolSizeH, W = poolSizeW, T = poolSizeT }, { H = arg3, W = arg2, T = arg1 })
end
