-- Pads the last two dims of planes x H x W input (or a batch) with the mirror image of the
-- border (the border itself not repeated); negative paddings crop.
local pad = require 'nn.util.pad'
local SpatialReflectionPadding = torch.class('nn.SpatialReflectionPadding', 'nn.Module')
pad.install(SpatialReflectionPadding, 'reflection')
