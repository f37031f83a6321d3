-- exp(-x) / sum(exp(-x)) over the class dim.
local softmax = require 'nn.util.softmax'
local SoftMin = torch.class('nn.SoftMin', 'nn.Module')

softmax.define(SoftMin, 'soft', -1)
