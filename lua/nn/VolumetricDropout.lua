-- Dropout of whole 3D feature volumes (planes x t x h x w, or a batch of them); see
-- nn.SpatialDropout.
local VolumetricDropout = torch.class('nn.VolumetricDropout', 'nn.SpatialDropout')

VolumetricDropout.planeDims = 4
