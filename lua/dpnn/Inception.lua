-- GoogLeNet's Inception block (arXiv:1409.4842) as dpnn builds it: a DepthConcat over the planes
-- of #kernelSize columns "1x1 reduce -> transfer -> kxk conv -> transfer", a pooling column
-- (pool, then an optional 1x1 reduce -> transfer) and an optional lone 1x1 reduce column.
-- config: inputSize, outputSize{...}, reduceSize{...} (one per conv column, then the pool's
-- reduce, then the lone 1x1), reduceStride, kernelSize {5,3}, kernelStride {1,1}, padding
-- (true), transfer (nn.ReLU()), batchNorm, pool (SpatialMaxPooling(poolSize, poolStride)).
-- Takes 3D (one image) or 4D (batch) input.
local Inception, parent = torch.class('nn.Inception', 'nn.Decorator')

function Inception:__init(config)
  if type(config) ~= 'table' then
    error('nn.Inception: expecting a config table {inputSize=, outputSize=, reduceSize=, ...}, got ' .. torch.type(config), 2)
  end
  for _, key in ipairs({ 'inputSize', 'outputSize', 'reduceSize' }) do
    if config[key] == nil then error('nn.Inception: config.' .. key .. ' is missing', 2) end
  end
  self.inputSize = config.inputSize
  self.outputSize = config.outputSize
  self.reduceSize = config.reduceSize
  self.reduceStride = config.reduceStride or {}
  self.transfer = config.transfer or nn.ReLU()
  self.batchNorm = config.batchNorm
  self.padding = config.padding == nil or config.padding
  self.kernelSize = config.kernelSize or { 5, 3 }
  self.kernelStride = config.kernelStride or { 1, 1 }
  self.poolSize = config.poolSize or 3
  self.poolStride = config.poolStride or 1
  self.pool = config.pool or nn.SpatialMaxPooling(self.poolSize, self.poolSize, self.poolStride, self.poolStride)

  local concat = nn.DepthConcat(2)
  local n = #self.kernelSize
  for i = 1, n do
    local column = self:_reduce(nn.Sequential(), i)
    local pad = self.padding and math.floor(self.kernelSize[i] / 2) or 0
    local k, stride = self.kernelSize[i], self.kernelStride[i] or 1
    column:add(nn.SpatialConvolution(self.reduceSize[i], self.outputSize[i], k, k, stride, stride, pad))
    self:_normalizeAndTransfer(column, self.outputSize[i])
    concat:add(column)
  end
  local poolColumn = nn.Sequential():add(self.pool)
  if self.reduceSize[n + 1] then self:_reduce(poolColumn, n + 1) end
  concat:add(poolColumn)
  if self.reduceSize[n + 2] then concat:add(self:_reduce(nn.Sequential(), n + 2)) end
  self:_warnInconsistentSizes()
  parent.__init(self, concat)
end

function Inception:_normalizeAndTransfer(column, planes)
  if self.batchNorm then column:add(nn.SpatialBatchNormalization(planes)) end
  return column:add(self.transfer:clone())
end

-- Adds column i's 1x1 reduction (inputSize -> reduceSize[i] planes) to seq.
function Inception:_reduce(seq, i)
  local stride = self.reduceStride[i] or 1
  seq:add(nn.SpatialConvolution(self.inputSize, self.reduceSize[i], 1, 1, stride, stride))
  return self:_normalizeAndTransfer(seq, self.reduceSize[i])
end

-- The columns' output maps should have one size (DepthConcat pads smaller ones); warns as dpnn
-- does when a 200x100 input would give them different sizes.
function Inception:_warnInconsistentSizes()
  local iH, iW = 200, 100
  local function out(size, k, stride, pad) return math.floor((size + 2 * pad - k) / stride + 1) end
  local oH, oW
  for i = 1, #self.kernelSize do
    local pad = self.padding and math.floor(self.kernelSize[i] / 2) or 0
    local k, s = self.kernelSize[i], self.kernelStride[i] or 1
    local h, w = out(iH, k, s, pad), out(iW, k, s, pad)
    if oH and (h ~= oH or w ~= oW) then print('dpnn.Inception: Warning: Inconsistent output sizes.') end
    oH, oW = oH or h, oW or w
  end
  local pool = self.pool
  if oH and pool.kW and pool.dW and pool.padW then
    if out(iH, pool.kH, pool.dH, pool.padH) ~= oH or out(iW, pool.kW, pool.dW, pool.padW) ~= oW then
      print('dpnn.Inception: Warning: Inconsistent output sizes in pooling.')
    end
  end
  local lone = #self.kernelSize + 2
  if self.reduceSize[lone] then
    local s = self.reduceStride[lone] or 1
    if out(iH, 1, s, 0) ~= oH or out(iW, 1, s, 0) ~= oW then
      print('dpnn.Inception: Warning: Inconsistent output sizes in 1x1 conv.')
    end
  end
end

function Inception:updateOutput(input)
  self.output = self:fromBatch(self.modules[1]:updateOutput(self:toBatch(input, 3)), 1)
  return self.output
end

function Inception:updateGradInput(input, gradOutput)
  local gradInput = self.modules[1]:updateGradInput(self:toBatch(input, 3), self:toBatch(gradOutput, 3))
  self.gradInput = self:fromBatch(gradInput, 1)
  return self.gradInput
end

for _, method in ipairs({ 'accGradParameters', 'accUpdateGradParameters' }) do
  Inception[method] = function(self, input, gradOutput, arg)
    self.modules[1][method](self.modules[1], self:toBatch(input, 3), self:toBatch(gradOutput, 3), arg)
  end
end
