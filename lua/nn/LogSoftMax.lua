-- log(softmax(x)) over the class dim.
local softmax = require 'nn.util.softmax'
local LogSoftMax = torch.class('nn.LogSoftMax', 'nn.Module')

softmax.define(LogSoftMax, 'log')
