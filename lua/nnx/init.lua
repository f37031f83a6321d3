-- nnx: Clement Farabet's experimental nn extensions (clementfarabet/lua---nnx), in Lua over our
-- torch and nn. Its classes register in the nn namespace (nn.SoftMaxTree, nn.SpatialReSampling...);
-- classes nn already has (SpatialMaxPooling, HardShrink, Abs...) stay nn's. nnx's own suite:
-- require 'nnx'; dofile(<nnx checkout>/test/test-all.lua); nnx.test().
require 'torch'
require 'xlua'
require 'nn'

nnx = nnx or {}
unpack = unpack or table.unpack

local classes = {
  -- tools
  'Probe', 'Tic', 'Toc', 'FunctionWrapper',
  -- spatial (image) operators
  'SpatialLinear', 'SpatialClassifier', 'SpatialUpSampling', 'SpatialDownSampling',
  'SpatialPadding', 'SpatialReSampling', 'SpatialReSamplingEx', 'SpatialMatching',
  'SpatialRadialMatching', 'SpatialColorTransform', 'SpatialNormalization', 'SpatialPyramid',
  'SpatialGraph', 'SpatialFovea', 'SpatialMaxSampling', 'PixelSort',
  -- pointwise, softmaxes and tables
  'Minus', 'SaturatedLU', 'SoftMaxTree', 'MultiSoftMax', 'Balance', 'PushTable', 'PullTable',
  'QDRiemaNNLinear',
  -- criterions
  'SuperCriterion', 'DistNLLCriterion', 'DistMarginCriterion', 'TreeNLLCriterion', 'CTCCriterion',
}
for _, name in ipairs(classes) do
  require('nnx.' .. name)
end

-- nnx's test/test-all.lua, not bundled, defines the real nnx.test when run with dofile.
function nnx.test()
  error("nnx.test: nnx's suite is not bundled: dofile('<nnx checkout>/test/test-all.lua') defines it", 2)
end

return nnx
