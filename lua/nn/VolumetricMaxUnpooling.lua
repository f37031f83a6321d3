-- The inverse of a VolumetricMaxPooling module (kernel size = stride): SpatialMaxUnpooling's
-- passes over volumes.
local VolumetricMaxUnpooling = torch.class('nn.VolumetricMaxUnpooling', 'nn.Module')

VolumetricMaxUnpooling._pooling, VolumetricMaxUnpooling._dims = 'nn.VolumetricMaxPooling', { 'T', 'H', 'W' }
for _, name in ipairs { '__init', '_geometry', 'updateOutput', 'updateGradInput', '__tostring__' } do
  VolumetricMaxUnpooling[name] = nn.SpatialMaxUnpooling[name]
end
