-- softmax over the feature planes at each position (3D or 4D input).
local softmax = require 'nn.util.softmax'
local SpatialSoftMax = torch.class('nn.SpatialSoftMax', 'nn.Module')

softmax.define(SpatialSoftMax, 'soft')
