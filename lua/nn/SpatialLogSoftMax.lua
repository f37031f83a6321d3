-- log-softmax over the feature planes at each position (3D or 4D input).
local softmax = require 'nn.util.softmax'
local SpatialLogSoftMax = torch.class('nn.SpatialLogSoftMax', 'nn.Module')

softmax.define(SpatialLogSoftMax, 'log')
