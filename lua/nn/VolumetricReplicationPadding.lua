-- Pads the last three dims of planes x T x H x W input (or a batch) with copies of the border
-- elements; negative paddings crop.
local pad = require 'nn.util.pad'
local VolumetricReplicationPadding = torch.class('nn.VolumetricReplicationPadding', 'nn.Module')
pad.install(VolumetricReplicationPadding, 'replication',
  { 'pleft', 'pright', 'ptop', 'pbottom', 'pfront', 'pback' },
  { 'left', 'right', 'top', 'bottom', 'front', 'back' })
