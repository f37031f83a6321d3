-- The max over a dim (see kernels/extremum.lua).
local extremum = require 'nn.kernels.extremum'
local Max = torch.class('nn.Max', 'nn.Module')

extremum.define(Max, 'max')
