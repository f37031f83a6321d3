-- The conv nets the plan tests build (tests/test_plans_conv.py: evaluation plans;
-- tests/test_plans_train.py: training plans), the way their projects build them, at small
-- sizes: each builder returns the model (of the default type: the tests convert it), the sizes
-- of one input sample and the number of classes. M.copyOf copies what the models give.
--   local M = dofile('tests/plan_models.lua')
local M = {}

-- batch norms' running statistics and affine parameters random (so that folding them into a
-- convolution's post-ops is visible)
function M.randomStats(model)
  for _, bn in ipairs(model:findModules('nn.SpatialBatchNormalization')) do
    bn.running_mean:uniform(-0.2, 0.2); bn.running_var:uniform(0.5, 2)
    if bn.weight then bn.weight:uniform(0.5, 1.5); bn.bias:uniform(-0.2, 0.2) end
  end
  return model
end
local randomStats = M.randomStats

-- A copy of v (a tensor, or a table of them, nested), as Double with double
function M.copyOf(v, double)
  if torch.type(v) == 'table' then
    local c = {}
    for i, x in ipairs(v) do c[i] = M.copyOf(x, double) end
    return c
  end
  if not torch.isTensor(v) then return v end
  return double and v:clone():double() or v:clone()
end

-- fb.resnet.torch's basic blocks (type-B shortcuts: a 1x1 convolution and batch norm where the
-- width changes, else nn.Identity), at 3 x 20 x 20. With corners, the corners of what a
-- training plan serves: convolutions with bias, a batch norm without affine parameters, ReLU
-- and CAddTable not in place (the second block), a batch norm's own eps and momentum.
function M.resnet(corners)
  local width = 8
  local function block(n, stride, inplace)
    local from = width
    width = n
    local body = nn.Sequential()
      :add(nn.SpatialConvolution(from, n, 3, 3, stride, stride, 1, 1):noBias())
      :add(nn.SpatialBatchNormalization(n)):add(nn.ReLU(inplace))
    local second = nn.SpatialConvolution(n, n, 3, 3, 1, 1, 1, 1)
    body:add(corners and second or second:noBias())
      :add(corners and nn.SpatialBatchNormalization(n, 1e-3, 0.2, inplace) or nn.SpatialBatchNormalization(n))
    local shortcut = nn.Identity()
    if from ~= n or stride ~= 1 then
      shortcut = nn.Sequential():add(nn.SpatialConvolution(from, n, 1, 1, stride, stride):noBias())
        :add(nn.SpatialBatchNormalization(n))
    end
    return nn.Sequential():add(nn.ConcatTable():add(body):add(shortcut)):add(nn.CAddTable(inplace))
      :add(nn.ReLU(inplace))
  end
  local first = nn.SpatialConvolution(3, 8, 5, 5, 2, 2, 2, 2)
  if not corners then first:noBias() end
  local model = nn.Sequential()
    :add(first)
    :add(nn.SpatialBatchNormalization(8)):add(nn.ReLU(true))
    :add(nn.SpatialMaxPooling(3, 3, 2, 2, 1, 1))
    :add(nn.Sequential():add(block(8, 1, true)):add(block(8, 1, not corners)))
    :add(nn.Sequential():add(block(16, 2, true)):add(block(16, 1, true)))
    :add(nn.SpatialAveragePooling(3, 3, 1, 1))
    :add(nn.View(16):setNumInputDims(3))
    :add(nn.Linear(16, 5))
  return model, { 3, 20, 20 }, 5
end

-- cifar.torch's vgg_bn_drop, smaller (widths a and b): convolutions with bias, batch norm (eps
-- 1e-3), dropout (each segment starts on a plain tensor of many channels), ceil-mode max
-- pooling, a classifier with a 1-D batch norm
function M.vgg(a, b)
  local model = nn.Sequential()
  local function conv(from, to, p)
    model:add(nn.SpatialConvolution(from, to, 3, 3, 1, 1, 1, 1))
      :add(nn.SpatialBatchNormalization(to, 1e-3)):add(nn.ReLU(true))
    if p then model:add(nn.Dropout(p)) end
  end
  conv(3, a, 0.3); conv(a, a); model:add(nn.SpatialMaxPooling(2, 2, 2, 2):ceil())
  conv(a, b, 0.4); conv(b, b); model:add(nn.SpatialMaxPooling(2, 2, 2, 2):ceil())
  model:add(nn.View(b * 3 * 3))
  model:add(nn.Linear(b * 3 * 3, 10)):add(nn.BatchNormalization(10)):add(nn.ReLU(true))
  model:add(nn.Linear(10, 4))
  return model, { 3, 11, 11 }, 4
end

-- fb.resnet.torch's preresnet.lua, small: pre-activation blocks (batch norm and ReLU before each
-- convolution) of its three kinds: 'no_preact' (the body starts with the convolution),
-- the default (batch norm and ReLU at the start of the body, the shortcut nn.Identity) and
-- 'both_preact' (before the ConcatTable: the shortcut's 1x1 convolution reads them too); a last
-- batch norm and ReLU before the pooling
function M.preresnet()
  local width = 8
  local function block(n, stride, kind)
    local from = width
    width = n
    local blk, body = nn.Sequential(), nn.Sequential()
    if kind == 'both_preact' then
      blk:add(nn.SpatialBatchNormalization(from)):add(nn.ReLU(true))
    elseif kind ~= 'no_preact' then
      body:add(nn.SpatialBatchNormalization(from)):add(nn.ReLU(true))
    end
    body:add(nn.SpatialConvolution(from, n, 3, 3, stride, stride, 1, 1))
      :add(nn.SpatialBatchNormalization(n)):add(nn.ReLU(true))
      :add(nn.SpatialConvolution(n, n, 3, 3, 1, 1, 1, 1))
    local shortcut = nn.Identity()
    if from ~= n or stride ~= 1 then
      shortcut = nn.Sequential():add(nn.SpatialConvolution(from, n, 1, 1, stride, stride))
    end
    return blk:add(nn.ConcatTable():add(body):add(shortcut)):add(nn.CAddTable(true))
  end
  local model = nn.Sequential()
    :add(nn.SpatialConvolution(3, 8, 3, 3, 1, 1, 1, 1)):add(nn.SpatialBatchNormalization(8)):add(nn.ReLU(true))
    :add(block(8, 1, 'no_preact')):add(block(8, 1)):add(block(16, 2, 'both_preact')):add(block(16, 1))
    :add(nn.SpatialBatchNormalization(16)):add(nn.ReLU(true))
    :add(nn.SpatialAveragePooling(5, 5, 1, 1)):add(nn.View(16):setNumInputDims(3)):add(nn.Linear(16, 5))
  return model, { 3, 10, 10 }, 5
end

-- wide-residual-networks' wide_basic blocks (models/wide-resnet.lua), small: where the width
-- changes, batch norm and ReLU before the ConcatTable and a bare 1x1 convolution as the
-- shortcut; else at the start of the body, the shortcut nn.Identity
function M.wide()
  local function wideBasic(from, n, stride)
    local blk, convs = nn.Sequential(), nn.Sequential()
    local pre = from == n and convs or blk
    pre:add(nn.SpatialBatchNormalization(from)):add(nn.ReLU(true))
    convs:add(nn.SpatialConvolution(from, n, 3, 3, stride, stride, 1, 1))
      :add(nn.SpatialBatchNormalization(n)):add(nn.ReLU(true))
      :add(nn.SpatialConvolution(n, n, 3, 3, 1, 1, 1, 1))
    local shortcut = from == n and nn.Identity() or nn.SpatialConvolution(from, n, 1, 1, stride, stride)
    return blk:add(nn.ConcatTable():add(convs):add(shortcut)):add(nn.CAddTable(true))
  end
  local model = nn.Sequential()
    :add(nn.SpatialConvolution(3, 8, 3, 3, 1, 1, 1, 1))
    :add(wideBasic(8, 16, 1)):add(wideBasic(16, 16, 1)):add(wideBasic(16, 24, 2))
    :add(nn.SpatialBatchNormalization(24)):add(nn.ReLU(true))
    :add(nn.SpatialAveragePooling(5, 5, 1, 1)):add(nn.View(24):setNumInputDims(3)):add(nn.Linear(24, 5))
  return model, { 3, 10, 10 }, 5
end

-- Caffe's LeNet: convolutions with bias (one SpatialConvolutionMM), no batch norm, max pooling, tanh
function M.lenet()
  local model = nn.Sequential()
    :add(nn.SpatialConvolution(1, 6, 5, 5)):add(nn.SpatialMaxPooling(2, 2, 2, 2))
    :add(nn.SpatialConvolutionMM(6, 10, 5, 5)):add(nn.SpatialMaxPooling(2, 2, 2, 2))
    :add(nn.View(10 * 4 * 4)):add(nn.Linear(160, 20)):add(nn.Tanh()):add(nn.Linear(20, 10))
    :add(nn.LogSoftMax())
  return model:float(), { 1, 28, 28 }
end

-- an Inception-like module: nn.Concat of branch Sequentials (each planned on its own)
function M.inception()
  local function branch(k, n)
    return nn.Sequential():add(nn.SpatialConvolution(6, n, k, k, 1, 1, (k - 1) / 2, (k - 1) / 2))
      :add(nn.SpatialBatchNormalization(n)):add(nn.ReLU(true))
  end
  local model = nn.Sequential()
    :add(nn.SpatialConvolution(3, 6, 3, 3, 1, 1, 1, 1)):add(nn.ReLU(true))
    :add(nn.Concat(2):add(branch(1, 4)):add(branch(3, 5))
      :add(nn.Sequential():add(nn.SpatialMaxPooling(3, 3, 1, 1, 1, 1)):add(branch(1, 3))))
    :add(nn.SpatialConvolution(12, 4, 1, 1)):add(nn.SpatialBatchNormalization(4))
  return randomStats(model:float()), { 3, 9, 9 }
end

-- dcgan.torch's generator: full convolutions (not planned), batch norm, ReLU, Tanh
function M.dcgan()
  local model = nn.Sequential()
    :add(nn.SpatialFullConvolution(6, 8, 4, 4)):add(nn.SpatialBatchNormalization(8)):add(nn.ReLU(true))
    :add(nn.SpatialFullConvolution(8, 4, 4, 4, 2, 2, 1, 1)):add(nn.SpatialBatchNormalization(4))
    :add(nn.ReLU(true)):add(nn.SpatialConvolution(4, 3, 3, 3, 1, 1, 1, 1)):add(nn.Tanh())
  return randomStats(model:float()), { 6, 1, 1 }
end
-- odd corners: batch norm without affine parameters after a convolution with bias, a 1x1
-- stride-2 convolution on an even size (its last row and column unread), padded max pooling
-- followed by a convolution of many channels (read from a plain tensor mid-model), Threshold
-- (not fused), a ReLU not in place
function M.corners()
  local model = nn.Sequential()
    :add(nn.SpatialConvolution(4, 6, 3, 3, 1, 1, 1, 1)):add(nn.SpatialBatchNormalization(6, 1e-5, 0.1, false))
    :add(nn.ReLU())
    :add(nn.SpatialConvolution(6, 8, 1, 1, 2, 2)):add(nn.SpatialBatchNormalization(8))
    :add(nn.Threshold(0.1, 0))
    :add(nn.SpatialConvolution(8, 20, 3, 3, 1, 1, 1, 1)):add(nn.ReLU(true))
    :add(nn.SpatialMaxPooling(3, 3, 2, 2, 1, 1)):add(nn.Tanh())
    :add(nn.SpatialConvolution(20, 24, 3, 3, 1, 1, 1, 1)):add(nn.SpatialBatchNormalization(24)):add(nn.ReLU(true))
  return randomStats(model:float()), { 4, 10, 10 }
end

-- the residual blocks' other forms (plan_conv.lua's residualUnit serves both kinds of plan): a
-- bare convolution as the shortcut (wide-residual-networks'), the shortcut first in its
-- ConcatTable and ending in a ReLU, and nn.Identity first with CAddTable(true) (the sum would
-- go into the block's input: not planned, run as it is between segments; the ReLU before it
-- not in place, since a planned in-place ReLU's backward masks the gradient by the output as the
-- forward left it, torch7's by its values after such a sum: see docs/plans-conv.md)
function M.shortcuts()
  local function body(from, n, stride)
    return nn.Sequential():add(nn.SpatialConvolution(from, n, 3, 3, stride, stride, 1, 1):noBias())
      :add(nn.SpatialBatchNormalization(n)):add(nn.ReLU(true))
      :add(nn.SpatialConvolution(n, n, 3, 3, 1, 1, 1, 1):noBias()):add(nn.SpatialBatchNormalization(n))
  end
  local reluShortcut = nn.Sequential():add(nn.SpatialConvolution(12, 12, 1, 1):noBias())
    :add(nn.SpatialBatchNormalization(12)):add(nn.ReLU(true))
  local model = nn.Sequential()
    :add(nn.SpatialConvolution(3, 8, 3, 3, 1, 1, 1, 1)):add(nn.SpatialBatchNormalization(8)):add(nn.ReLU(true))
    :add(nn.ConcatTable():add(body(8, 12, 2)):add(nn.SpatialConvolution(8, 12, 1, 1, 2, 2)))
    :add(nn.CAddTable(true)):add(nn.ReLU(true))
    :add(nn.ConcatTable():add(reluShortcut):add(body(12, 12, 1))):add(nn.CAddTable()):add(nn.ReLU())
    :add(nn.ConcatTable():add(nn.Identity()):add(body(12, 12, 1))):add(nn.CAddTable(true)):add(nn.ReLU(true))
    :add(nn.SpatialAveragePooling(5, 5, 1, 1)):add(nn.View(12):setNumInputDims(3)):add(nn.Linear(12, 5))
  return model, { 3, 10, 10 }, 5
end

-- bench/real_models.lua's ResNet-18 (fb.resnet.torch's), as the bench trains it: no gradient for
-- the input batch
function M.resnet18()
  local models = dofile('bench/real_models.lua')
  local model = models.resnet18(10)
  model.modules[1].gradInput = nil
  return model, { 3, 224, 224 }, 10
end

return M
