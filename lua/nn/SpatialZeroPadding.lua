-- Pads the last two dims of planes x H x W input (or a batch) with zeros; negative paddings crop.
local pad = require 'nn.util.pad'
local SpatialZeroPadding = torch.class('nn.SpatialZeroPadding', 'nn.Module')
pad.install(SpatialZeroPadding, 'zero')
