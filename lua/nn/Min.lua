-- The min over a dim (see nn/util/extremum.lua).
local extremum = require 'nn.util.extremum'
local Min = torch.class('nn.Min', 'nn.Module')

extremum.define(Min, 'min')
