-- The max over a dim (see nn/util/extremum.lua).
local extremum = require 'nn.util.extremum'
local Max = torch.class('nn.Max', 'nn.Module')

extremum.define(Max, 'max')
