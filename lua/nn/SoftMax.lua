-- exp(x) / sum(exp(x)) over the class dim.
local softmax = require 'nn.util.softmax'
local SoftMax = torch.class('nn.SoftMax', 'nn.Module')

softmax.define(SoftMax, 'soft')
