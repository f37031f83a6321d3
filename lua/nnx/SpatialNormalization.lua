-- nnx's (deprecated) spatial contrast normaliser for nInputPlane x H x W maps: with S(x) the
-- kernel-weighted sum of x over a zero-padded neighbourhood and over all planes (the kernel is
-- normalised to sum 1; two 1D kernels {Kx1, 1xK} apply one after the other) and c = S(ones),
--   mean = S(x) / c,  std = sqrt(S((x - mean)^2)) / c,  output = (x - mean) / max'(std),
-- where max' replaces std <= t by t, t being `threshold` or max(mean(std), 1e-3).
-- Prefer nn.SpatialContrastiveNormalization in new code.
local SpatialNormalization, parent = torch.class('nn.SpatialNormalization', 'nn.Module')

local warned = false

-- S as modules: for each kernel, zero padding, a convolution summing all planes, and the
-- sum copied back to every plane.
local function neighbourhoodSum(nf, kernels)
  local seq = nn.Sequential()
  for _, k in ipairs(kernels) do
    local kH, kW = k:size(1), k:size(2)
    local padW, padH = math.floor(kW / 2), math.floor(kH / 2)
    seq:add(nn.SpatialPadding(padW, padW - (kW + 1) % 2, padH, padH - (kH + 1) % 2))
    local conv = nn.SpatialConvolution(nf, 1, kW, kH)
    conv.weight:copy(k:view(1, 1, kH, kW):expand(1, nf, kH, kW))
    conv.bias:zero()
    seq:add(conv)
    seq:add(nn.Select(1, 1))
    seq:add(nn.Replicate(nf))
  end
  return seq
end

function SpatialNormalization:__init(...)
  parent.__init(self)
  if not warned then
    print('<SpatialNormalization> WARNING: this module has been deprecated,')
    print(' please use SpatialContrastiveNormalization instead')
    warned = true
  end
  local _, nf, kernel, threshold = xlua.unpack({...}, 'nn.SpatialNormalization', 'a spatial contrast normaliser',
    {arg = 'nInputPlane', type = 'number', help = 'number of input maps', req = true},
    {arg = 'kernel', type = 'torch.Tensor | table', help = 'a KxK kernel or two 1D kernels {Kx1, 1xK}'},
    {arg = 'threshold', type = 'number', help = 'threshold for the division [default = adaptive]'})
  if not kernel then error('nn.SpatialNormalization: please provide kernel(s)', 2) end
  local kernels = type(kernel) == 'table' and kernel or {kernel}
  for _, k in ipairs(kernels) do
    if k:dim() ~= 2 then
      error(('nn.SpatialNormalization: kernels must be 2D, got size [%s]')
        :format(table.concat(k:size():totable(), 'x')), 2)
    end
    k:div(k:sum())
  end
  self.kernel, self.nfeatures, self.fixedThres = kernel, nf, threshold
  self.convo = neighbourhoodSum(nf, kernels)
  self.convostd = neighbourhoodSum(nf, kernels)
  self.meanDiviseMod = nn.CDivTable()
  self.subtractMod = nn.CSubTable()
  self.squareMod = nn.Square()
  self.sqrtMod = nn.Sqrt()
  self.stdDiviseMod = nn.CDivTable()
  self.thresMod = nn.Threshold()
  self.diviseMod = nn.CDivTable()
  self.coef = torch.Tensor()
end

-- A 2D input counts as one plane.
local function planesOf(input)
  if input:dim() == 2 then return input:view(1, input:size(1), input:size(2)) end
  return input
end

function SpatialNormalization:updateOutput(input)
  local x = planesOf(input)
  if x:dim() ~= 3 or x:size(1) ~= self.nfeatures then
    error(('nn.SpatialNormalization: expected %d x H x W input, got size [%s]')
      :format(self.nfeatures, table.concat(input:size():totable(), 'x')), 2)
  end
  if self.coef:dim() ~= 3 or self.coef:size(2) ~= x:size(2) or self.coef:size(3) ~= x:size(3) then
    self.coef = self.convo:updateOutput(x.new():resizeAs(x):fill(1)):clone()
  end
  self.inConvo = self.convo:updateOutput(x)
  self.inMean = self.meanDiviseMod:updateOutput({self.inConvo, self.coef})
  self.inputZeroMean = self.subtractMod:updateOutput({x, self.inMean})
  self.inputZeroMeanSq = self.squareMod:updateOutput(self.inputZeroMean)
  self.inConvoVar = self.convostd:updateOutput(self.inputZeroMeanSq)
  self.inStdDevNotUnit = self.sqrtMod:updateOutput(self.inConvoVar)
  self.inStdDev = self.stdDiviseMod:updateOutput({self.inStdDevNotUnit, self.coef})
  local threshold = self.fixedThres or math.max(self.inStdDev:mean(), 1e-3)
  self.thresMod.threshold, self.thresMod.val = threshold, threshold
  self.stdDev = self.thresMod:updateOutput(self.inStdDev)
  self.output = self.diviseMod:updateOutput({self.inputZeroMean, self.stdDev}):view(input:size())
  return self.output
end

-- Back through the same chain, in reverse.
function SpatialNormalization:updateGradInput(input, gradOutput)
  local x = planesOf(input)
  local g = gradOutput:contiguous():view(x:size())
  local gradDiv = self.diviseMod:updateGradInput({self.inputZeroMean, self.stdDev}, g)
  local gradStd = self.thresMod:updateGradInput(self.inStdDev, gradDiv[2])
  local gradStdNotUnit = self.stdDiviseMod:updateGradInput({self.inStdDevNotUnit, self.coef}, gradStd)[1]
  local gradVar = self.sqrtMod:updateGradInput(self.inConvoVar, gradStdNotUnit)
  local gradZeroMeanSq = self.convostd:updateGradInput(self.inputZeroMeanSq, gradVar)
  local gradZeroMean = gradDiv[1]:clone():add(self.squareMod:updateGradInput(self.inputZeroMean, gradZeroMeanSq))
  local gradDiff = self.subtractMod:updateGradInput({x, self.inMean}, gradZeroMean)
  local gradConvo = self.meanDiviseMod:updateGradInput({self.inConvo, self.coef}, gradDiff[2])[1]
  self.gradInput:resizeAs(x):copy(gradDiff[1]):add(self.convo:updateGradInput(x, gradConvo))
  self.gradInput = self.gradInput:view(input:size())
  return self.gradInput
end
