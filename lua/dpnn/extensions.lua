-- dpnn's additions to existing nn classes: which fields nn.Serial empties (mediumSerial) for the
-- modules that keep big buffers, which fields sharedClone shares for batch normalization,
-- LookupTable's max norms (its rows are the embeddings), and batch helpers for criterions.
local _ = require 'moses'
local Module = nn.Module

local function withFields(list, ...)
  local out = _.clone(list)
  for _, name in ipairs({ ... }) do out[#out + 1] = name end
  return out
end

local convolutionEmpty = withFields(Module.dpnn_mediumEmpty, 'finput', 'fgradinput', '_input', '_gradOutput')
nn.SpatialConvolution.dpnn_mediumEmpty = convolutionEmpty
nn.SpatialConvolutionMM.dpnn_mediumEmpty = convolutionEmpty
nn.SpatialMaxPooling.dpnn_mediumEmpty = withFields(Module.dpnn_mediumEmpty, 'indices')

local normalizationEmpty = withFields(Module.dpnn_mediumEmpty,
  'buffer', 'buffer2', 'centered', 'std', 'normalized', 'output', 'gradInput')
nn.BatchNormalization.dpnn_mediumEmpty = normalizationEmpty
nn.SpatialBatchNormalization.dpnn_mediumEmpty = normalizationEmpty
nn.BatchNormalization.dpnn_parameters = withFields(Module.dpnn_parameters, 'running_mean', 'running_var')

-- maxOutNorm caps each embedding's norm (the columns feed the output); maxInNorm each row.
function nn.LookupTable:maxParamNorm(maxOutNorm, maxInNorm)
  maxOutNorm = self.maxOutNorm or maxOutNorm or self.maxInNorm or maxInNorm
  if not (maxOutNorm or maxInNorm) then return end
  if maxOutNorm and maxOutNorm > 0 then self.weight:renorm(2, 2, maxOutNorm) end
  if maxInNorm and maxInNorm > 0 then self.weight:renorm(2, 1, maxInNorm) end
end

nn.Criterion.toBatch = Module.toBatch
nn.Criterion.fromBatch = Module.fromBatch
