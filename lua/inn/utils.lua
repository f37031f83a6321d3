-- inn.utils: network surgery of imagine-nn.
--   foldBatchNorm(net): every batch normalization right after a convolution (spatial or
--     volumetric) or a Linear in the same container is folded into that layer's weight and bias
--     (its running statistics and affine transform), and removed; in place.
--   BNtoFixed(net, inplace): every batch normalization replaced by an inn.ConstAffine computing
--     the same evaluation-mode transform; returns net.
--   testSurgery(input, f, net, ...): runs f(net, ...) and returns the largest absolute change of
--     net's output on input.
require 'inn.env'
local utils = {}

local pairsOf = {
  { 'SpatialBatchNormalization', 'SpatialConvolution' },
  { 'VolumetricBatchNormalization', 'VolumetricConvolution' },
  { 'BatchNormalization', 'Linear' },
}

local function isBN(m)
  return torch.typename(m) and torch.typename(m):find('BatchNormalization') ~= nil
end

-- 1/sqrt(var + eps) of a batch normalization (older ones kept running_std, already inverted)
local function invstd(bn)
  if bn.running_var then return bn.running_var:double():add(bn.eps):pow(-0.5) end
  if bn.running_std then return bn.running_std:double() end
  error('inn.utils: ' .. torch.type(bn) .. ' has neither running_var nor running_std', 3)
end

local function foldable(bn, layer)
  local tb, tl = torch.typename(bn) or '', torch.typename(layer) or ''
  for _, p in ipairs(pairsOf) do
    -- the batch-norm kind must match exactly (SpatialBatchNormalization is not BatchNormalization)
    local bnName = tb:match('%.([%w]+)$')
    if bnName == p[1] and tl:find(p[2], 1, true) then return true end
  end
  return false
end

local function fold(layer, bn)
  local no = layer.weight:size(1)
  local w = layer.weight:view(no, -1)
  local s = invstd(bn)
  local mean = bn.running_mean:double()
  local bias = layer.bias and layer.bias:double() or torch.zeros(no):double()
  local scale, shift = s:clone(), bias:add(-1, mean):cmul(s)
  if bn.weight then   -- affine
    scale:cmul(bn.weight:double())
    shift:cmul(bn.weight:double()):add(bn.bias:double())
  end
  w:cmul(scale:typeAs(w):view(no, 1):expandAs(w))
  if not layer.bias then
    layer.bias = layer.weight.new(no)
    layer.gradBias = layer.weight.new(no):zero()
  end
  layer.bias:copy(shift)
  if layer.resetWeightDescriptors then layer:resetWeightDescriptors() end
end

local function foldIn(net)
  if not net.modules then return end
  local i = 1
  while i <= #net.modules do
    local m = net.modules[i]
    if m.modules then
      foldIn(m)
      i = i + 1
    elseif i > 1 and isBN(m) and foldable(m, net.modules[i - 1]) then
      fold(net.modules[i - 1], m)
      table.remove(net.modules, i)
    else
      i = i + 1
    end
  end
end

function utils.foldBatchNorm(net)
  foldIn(net)
  local left = {}
  net:apply(function(m) if isBN(m) then left[#left + 1] = m end end)
  if #left > 0 then print('Couldnt fold these:', left) end
  return net
end

function utils.BNtoFixed(net, inplace)
  net = net:replace(function(m)
    if not isBN(m) then return m end
    local y = inn.ConstAffine(m.running_mean:nElement(), inplace):type(m.running_mean:type())
    local s = invstd(m)
    local a, b = s:clone(), s:clone():cmul(m.running_mean:double()):mul(-1)
    if m.weight then
      a:cmul(m.weight:double())
      b:cmul(m.weight:double()):add(m.bias:double())
    end
    y.a:copy(a)
    y.b:copy(b)
    return y
  end)
  net:apply(function(m)
    if isBN(m) then error('inn.utils.BNtoFixed: ' .. torch.type(m) .. ' left in the network', 2) end
  end)
  return net
end

function utils.testSurgery(input, f, net, ...)
  local before = net:forward(input):clone()
  f(net, ...)
  local after = net:forward(input):clone()
  return (before - after):abs():max()
end

return utils
