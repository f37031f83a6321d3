-- The min over a dim (see kernels/extremum.lua).
local extremum = require 'nn.kernels.extremum'
local Min = torch.class('nn.Min', 'nn.Module')

extremum.define(Min, 'min')
