-- .t7 files and torch7: reading modules that torch7 (any version) or cudnn wrote, and writing
-- modules that torch7 can run. torch7 upgraded old modules lazily, in updateOutput or in a
-- class's read method; here every upgrade happens once, when the module is read (torch.load,
-- torch.deserialize, File:readObject), so our classes see the fields they expect. Objects of
-- cudnn classes are read as those classes once require 'cudnn' made them (lua/cudnn: the
-- upgrades below serve them too, through their nn parents); before, those nn has
-- (cudnn.SpatialConvolution, ...) are read as the nn class they derive from or stand for:
-- torch.File.classAliases maps the names. Written, a module also holds the few
-- buffers and sub-modules torch7's code expects where ours differ (not done for the
-- Spatial{Subtractive,Divisive,Contrastive}Normalization and IndexLinear, built otherwise).
require 'torch'
local check = require 'torch.core.check'
local localnorm = require 'nn.util.localnorm'

-- cudnn classes read as nn ones while cudnn is not loaded: those cudnn.convert turns into nn
-- ones field for field (its layer list), plus the softmaxes and the temporal convolution
-- (upgraded below); cudnn.ClippedReLU is nn.Clamp.
local cudnnClasses = {
  'SpatialConvolution', 'SpatialFullConvolution', 'VolumetricConvolution', 'VolumetricFullConvolution',
  'SpatialMaxPooling', 'SpatialAveragePooling', 'VolumetricMaxPooling', 'VolumetricAveragePooling',
  'ReLU', 'Tanh', 'Sigmoid', 'SoftMax', 'LogSoftMax', 'SpatialSoftMax', 'SpatialLogSoftMax',
  'BatchNormalization', 'SpatialBatchNormalization', 'VolumetricBatchNormalization',
  'SpatialCrossMapLRN', 'TemporalConvolution',
}
for _, name in ipairs(cudnnClasses) do torch.File.classAliases['cudnn.' .. name] = 'nn.' .. name end
torch.File.classAliases['cudnn.ClippedReLU'] = 'nn.Clamp'
require 'nn.DataParallelTable'   -- cunn's one class of its own (nn.DataParallelTable), as models on GPUs were saved

-- The classes torch7 versions (__version, written as "V n" with each object) as it does.
nn.SpatialBatchNormalization.__version = 2
nn.GradientReversal.__version = 2
nn.VolumetricMaxPooling.__version = 2

-- cudnn's average poolings keep their kind in `mode` (and always divide).
local function cudnnAverage(self)
  if self.mode then
    self.divide = true
    self.count_include_pad = self.mode ~= 'CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING'
    self.mode = nil
  end
end

-- Fields the upgrades below compute from: files are untrusted, so each is checked first. A
-- tensor must hold no more elements than its storage (an expanded one, with zero strides, could
-- make a copy of any size); a count must be a whole number in [1, max].
local function tensorField(self, name)
  local t = self[name]
  if not torch.isTensor(t) or t:nElement() > (t:storage() and t:storage():size() or 0) then
    check.error(('%s: field %s is not a tensor within its storage'):format(torch.type(self), name))
  end
  return t
end

local function countField(self, name, max)
  local n = self[name]
  if type(n) ~= 'number' or n < 1 or n > max or n ~= math.floor(n) then
    check.error(('%s: field %s is %s, expected a whole number in [1, %d]'):format(
      torch.type(self), name, tostring(n), max))
  end
  return n
end

-- The estimator of the local normalizations: nInputPlane copies of the kernel (a 1D kernel
-- stands for its outer product with itself), at most 2^24 weights.
local function estimator(self)
  local kernel = tensorField(self, 'kernel')
  local n = kernel:nElement()
  local size = math.max(kernel:dim() == 1 and n * n or n, 1)
  local planes = countField(self, 'nInputPlane', math.floor(2 ^ 24 / size))
  return localnorm.estimator(self, planes, kernel)
end

local function defaults(self, values)
  for k, v in pairs(values) do
    if self[k] == nil then self[k] = v end
  end
end

-- The fields as read, then upgrade(self, version): name -> upgrade. A class inherits its
-- parent's upgrades (the parent's read runs first).
local upgrades = {
  ['nn.BatchNormalization'] = function(self, version)
    -- version 1 kept 1 / sqrt(var + eps)
    if version < 2 and self.running_std then
      self.running_var = tensorField(self, 'running_std'):clone():pow(-2):add(-self.eps)
      self.running_std = nil
    end
    if self.train == nil then self.train = false end   -- torch7 ran such a module in evaluation mode
  end,
  ['nn.Threshold'] = function(self) defaults(self, { inplace = false }) end,
  ['nn.CReLU'] = function(self) self.modules = nil end,   -- torch7's sub-modules (ours has none)
  ['nn.ReLU'] = function(self) defaults(self, { threshold = 0, val = 0 }) end,   -- cudnn.ReLU has neither
  ['nn.HardTanh'] = function(self) defaults(self, { min_val = -1, max_val = 1, inplace = false }) end,
  -- torch7's ReLU6 has no bounds fields (they are 0 and 6); cudnn.ClippedReLU has a ceiling
  ['nn.ReLU6'] = function(self) self.min_val, self.max_val = 0, 6 end,
  ['nn.Clamp'] = function(self)
    if self.ceiling then self.min_val, self.max_val, self.ceiling = 0, self.ceiling, nil end
  end,
  ['nn.Sqrt'] = function(self) defaults(self, { eps = 0 }) end,
  ['nn.Replicate'] = function(self) defaults(self, { dim = 1 }) end,
  ['nn.Sum'] = function(self) defaults(self, { squeeze = true }) end,
  ['nn.Mean'] = function(self) defaults(self, { sizeAverage = true }) end,   -- before Mean was a Sum
  ['nn.GradientReversal'] = function(self) defaults(self, { lambda = 1 }) end,
  ['nn.LookupTable'] = function(self)
    defaults(self, { shouldScaleGradByFreq = false, paddingValue = 0 })
  end,
  ['nn.MultiMarginCriterion'] = function(self) defaults(self, { p = 1 }) end,
  ['nn.HingeEmbeddingCriterion'] = function(self) defaults(self, { sizeAverage = true }) end,
  -- torch7 keeps the sizes in DoubleTensors
  ['nn.Bottle'] = function(self)
    self.inShape = torch.LongStorage(countField(self, 'nInputDim', 64))
    self.outShape = torch.LongStorage(countField(self, 'nOutputDim', 64))
  end,
  ['nn.SpatialConvolution'] = function(self)
    if self.padding then self.padW, self.padH, self.padding = self.padding, self.padding, nil end
    defaults(self, { padW = 0, padH = 0 })
    if self.keepsGroups then   -- cudnn.SpatialConvolution (lua/cudnn) runs groups
      defaults(self, { groups = 1 })   -- older cudnn.torch, or converted from nn
      self.groups = countField(self, 'groups', math.max(1, self.nInputPlane or 1))
    elseif (self.groups or 1) ~= 1 then
      check.error(('%s: grouped convolutions (cudnn groups = %d) are not supported; require \'cudnn\' ' ..
        'first (with LUABRIDGE_CUDA_ON_CPU=1 without a GPU) to read them as cudnn.SpatialConvolution'):format(
        torch.type(self), self.groups))
    else
      self.groups = nil
    end
    -- old files (SpatialConvolutionMM's layout) hold a 2D weight
    if torch.type(self) == 'nn.SpatialConvolution' then
      local sizes = { self.nOutputPlane, self.nInputPlane, self.kH, self.kW }
      for _, k in ipairs { 'weight', 'gradWeight' } do
        if torch.isTensor(self[k]) and self[k]:dim() == 2 then self[k] = self[k]:view(torch.LongStorage(sizes)) end
      end
    end
  end,
  ['nn.SpatialFullConvolution'] = function(self) defaults(self, { adjW = 0, adjH = 0 }) end,
  ['nn.VolumetricFullConvolution'] = function(self)
    if self.adjW == nil then   -- before adj*, the weight's first two dims were the other way round
      self.weight = tensorField(self, 'weight'):transpose(1, 2):contiguous()
      if self.gradWeight then self.gradWeight = tensorField(self, 'gradWeight'):transpose(1, 2):contiguous() end
    end
    defaults(self, { padW = self.pW, padH = self.pH, padT = self.pT })
    self.pW, self.pH, self.pT = nil, nil, nil
    defaults(self, { adjW = 0, adjH = 0, adjT = 0 })
  end,
  -- cudnn.TemporalConvolution is a 1-plane SpatialConvolution whose kH, dH are the kernel
  -- width and stride in time (kW is the frame size), with the same weight layout.
  ['nn.TemporalConvolution'] = function(self)
    if self.nInputPlane == 1 and self.kH then
      local pad = self.padH or 0
      if pad ~= 0 and torch.type(self) ~= 'cudnn.TemporalConvolution' then
        check.error('nn.TemporalConvolution: a padded cudnn.TemporalConvolution is not supported; require ' ..
          "'cudnn' first (with LUABRIDGE_CUDA_ON_CPU=1 without a GPU) to read it as one")
      end
      self.kW, self.dW = self.kH, self.dH
      for _, k in ipairs { 'nInputPlane', 'nOutputPlane', 'kH', 'dH', 'padW', 'padH', 'groups', 'iSize', 'oSize' } do
        self[k] = nil
      end
      if pad ~= 0 then self.padH = pad end
    end
  end,
  ['nn.SpatialMaxPooling'] = function(self) defaults(self, { ceil_mode = false, padW = 0, padH = 0 }) end,
  ['nn.VolumetricMaxPooling'] = function(self)
    defaults(self, { ceil_mode = false, padT = 0, padW = 0, padH = 0 })
  end,
  -- torch7 files without `divide` sum the window
  ['nn.SpatialAveragePooling'] = function(self)
    cudnnAverage(self)
    if self.ceil_mode == nil then
      self.ceil_mode, self.count_include_pad, self.padW, self.padH = false, true, 0, 0
    end
    if self.divide == nil then self.divide = false end
  end,
  ['nn.VolumetricAveragePooling'] = cudnnAverage,
  ['nn.SpatialCrossMapLRN'] = function(self)   -- early cudnn files named k "K"
    if self.K then self.k, self.K = self.K, nil end
  end,
  -- torch7 builds these from sub-modules; ours from the kernel, which torch7 keeps normalized
  -- (the estimator normalizes it again, which changes nothing)
  ['nn.SpatialSubtractiveNormalization'] = function(self)
    if not self.estimator then
      self.estimator = estimator(self)
      for _, k in ipairs { 'meanestimator', 'subtractor', 'divider', 'coef', 'ones', '_inpsz' } do self[k] = nil end
    end
  end,
  ['nn.SpatialDivisiveNormalization'] = function(self)
    if not self.estimator then
      self.estimator = estimator(self)
      for _, k in ipairs { 'meanestimator', 'stdestimator', 'normalizer', 'divider', 'thresholder', 'coef', 'ones' } do
        self[k] = nil
      end
    end
  end,
}

for name, upgrade in pairs(upgrades) do
  local class = torch.getmetatable(name)
  local own, parent = rawget(class, 'read'), torch.parentOf(class)
  class.read = function(self, file, version)
    local read = own or (parent and parent.read) or nn.Module.read   -- criterions have none
    read(self, file, version)
    upgrade(self, version or 0)
  end
end

-- Fields torch7's code uses without making them (buffers and sub-modules its constructors make)
-- and that ours do not have, added to what is written so that torch7 can run the modules we
-- save: name -> function(self) giving them. Read back, ours ignore them (or the upgrades above
-- drop them).
local function buffer(self)
  local like = torch.isTensor(self.output) and self.output or self.gradInput
  return torch.isTensor(like) and like.new() or torch.Tensor()
end
local function buffers(...)
  local names = { ... }
  return function(self)
    local t = {}
    for _, k in ipairs(names) do t[k] = buffer(self) end
    return t
  end
end
local function sizes(n)
  return function() return { inputSize = torch.LongStorage(n), outputSize = torch.LongStorage(n) } end
end

local torch7Fields = {
  ['nn.TanhShrink'] = function() return { tanh = nn.Tanh() } end,
  ['nn.MultiLabelSoftMarginCriterion'] = function() return { sigmoid = nn.Sigmoid() } end,
  ['nn.CReLU'] = function(self)   -- torch7's CReLU is this Sequential
    return { modules = { nn.ConcatTable():add(nn.Identity()):add(nn.MulConstant(-1)), nn.JoinTable(2),
      nn.ReLU(self.inplace) } }
  end,
  ['nn.Bottle'] = function(self)
    return { inShape = torch.Tensor(self.nInputDim), outShape = torch.Tensor(self.nOutputDim) }
  end,
  ['nn.CMaxTable'] = buffers('mask', 'maxVals', 'gradMaxVals'),
  ['nn.CMinTable'] = buffers('mask', 'minVals', 'gradMaxVals'),
  ['nn.MaskedSelect'] = function() return { _maskIndexBufferCPU = torch.FloatTensor() } end,
  ['nn.SpatialFullConvolution'] = buffers('ones'),
  ['nn.VolumetricFullConvolution'] = buffers('ones', 'finput', 'fgradInput'),
  ['nn.SpatialUpSamplingNearest'] = sizes(4),
  ['nn.SpatialUpSamplingBilinear'] = sizes(4),
  ['nn.UpSampling'] = sizes(5),
  ['nn.ClassNLLCriterion'] = function() return { target = torch.LongTensor(1) } end,
  ['nn.SpatialClassNLLCriterion'] = function() return { target = torch.LongTensor(1) } end,
}

for name, extra in pairs(torch7Fields) do
  torch.getmetatable(name).write = function(self, file) file:writeFields(self, extra(self)) end
end

-- torch7's nn makes torch.Timer (nn.Profile's) serializable as nothing: read back, it is a
-- new timer.
local Timer = torch.getmetatable('torch.Timer')
Timer.__factory = function() return torch.Timer() end
function Timer:write(file) end
function Timer:read(file, version) end
