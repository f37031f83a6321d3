-- Pads the last two dims of planes x H x W input (or a batch) with copies of the border
-- elements; negative paddings crop.
local pad = require 'nn.util.pad'
local SpatialReplicationPadding = torch.class('nn.SpatialReplicationPadding', 'nn.Module')
pad.install(SpatialReplicationPadding, 'replication')
