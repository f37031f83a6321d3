-- dpnn's Dictionary (dropped from dpnn in 2016, still used by older code): a LookupTable whose
-- training touches only the rows (embeddings) looked up by a backward since the last
-- zeroGradParameters. sparseParameters returns those rows, so updateParameters, momentum and
-- zeroGradParameters cost the rows used, not the whole table. accUpdate keeps no gradWeight.
local Dictionary, parent = torch.class('nn.Dictionary', 'nn.LookupTable')

function Dictionary:__init(dictSize, embeddingSize, accUpdate)
  parent.__init(self, dictSize, embeddingSize)
  if accUpdate then self:accUpdateOnly() end
  self.accUpdate = accUpdate
  self.inputs = {} -- row index -> how many times a backward used it
end

function Dictionary:updateOutput(input)
  if torch.type(input) == 'torch.CudaTensor' then
    error('nn.Dictionary: counts its indices on the CPU; expecting a non-CUDA input', 2)
  end
  return parent.updateOutput(self, input)
end

function Dictionary:accGradParameters(input, gradOutput, scale)
  local idx = self:indices(input)
  for i = 1, idx:nElement() do
    local k = tonumber(idx[i])
    self.inputs[k] = (self.inputs[k] or 0) + 1
  end
  return parent.accGradParameters(self, input, gradOutput, scale)
end

-- The used rows, keyed by row index, each with scale 1, out of weight:size(1).
function Dictionary:sparseParameters()
  local params, gradParams, scales = {}, {}, {}
  for k in pairs(self.inputs) do
    params[k] = self.weight:select(1, k)
    gradParams[k] = self.gradWeight and self.gradWeight:select(1, k)
    scales[k] = 1
  end
  return params, gradParams, scales, self.weight:size(1)
end

-- Views of the used rows in Module's dense momentum buffer (started, as dpnn's, as a copy of
-- gradWeight), keyed as sparseParameters keys them, for Module:updateGradParameters.
function Dictionary:momentumGradParameters()
  assert(not self.accUpdate, 'nn.Dictionary: no momentum with accUpdate (there is no gradWeight)')
  local momGradWeight = parent.momentumGradParameters(self)[1]
  local rows = {}
  for k in pairs(self.inputs) do rows[k] = momGradWeight:select(1, k) end
  return rows
end

-- As dpnn's: renorm along dim 2 of each used 1 x embeddingSize row, which caps every element.
function Dictionary:maxParamNorm(maxOutNorm, maxInNorm)
  maxOutNorm = self.maxOutNorm or maxOutNorm or self.maxInNorm or maxInNorm
  if not maxOutNorm then return end
  for k in pairs(self.inputs) do self.weight:narrow(1, k, 1):renorm(2, 2, maxOutNorm) end
end

function Dictionary:zeroGradParameters()
  for k in pairs(self.inputs) do
    if self.gradWeight then self.gradWeight:select(1, k):zero() end
    self.inputs[k] = nil
  end
end

-- A shared clone shares the record of used rows too.
function Dictionary:sharedClone(shareParams, shareGradParams, stepClone)
  local clone = parent.sharedClone(self, shareParams, shareGradParams, stepClone)
  clone.inputs = self.inputs
  return clone
end
