-- Element-Research's dpnn: additions to nn's Module, Container and Criterion (sharing clones,
-- serialization modes, max norms, gradient clipping, momentum, batch helpers...) and its
-- modules, registered in nn as torch7's dpnn registers them. Loaded by require 'dpnn' only:
-- these change some nn behaviour (getParameters also flattens modules held in fields).
require 'torch'
require 'nn'
dpnn = rawget(_G, 'dpnn') or {}
dpnn.version = 2

-- require(name), naming the package to install when it is missing.
function dpnn.require(packagename)
  assert(torch.type(packagename) == 'string', 'dpnn.require: expecting a package name')
  local ok, message = pcall(require, packagename)
  if not ok then
    print("missing package " .. packagename .. ": run 'luarocks install nnx'")
    error(message, 2)
  end
end

for _, name in ipairs {
  -- additions to existing classes
  'Module', 'Container', 'extensions',
  -- decorators and modules
  'Serial', 'ReverseTable', 'Inception', 'Clip', 'SpatialUniformCrop', 'SpatialGlimpse',
  'ArgMax', 'CategoricalEntropy', 'TotalDropout', 'SpatialRegionDropout', 'FireModule',
  'SpatialFeatNormalization', 'SpatialBinaryConvolution', 'SimpleColorTransform',
  'PCAColorTransform', 'Dictionary',
  -- noise contrastive estimation
  'NCEModule', 'NCECriterion',
  -- REINFORCE
  'Reinforce', 'ReinforceGamma', 'ReinforceBernoulli', 'ReinforceNormal', 'ReinforceCategorical',
  'VRClassReward', 'BinaryClassReward',
  -- criterions
  'BinaryLogisticRegression', 'SpatialBinaryLogisticRegression',
} do
  require('dpnn.' .. name)
end

return dpnn
