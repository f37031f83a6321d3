-- cudnn.convert(net, dst[, exclusion_fn]): net with each layer of cudnn.torch's list turned
-- into dst's (nn or cudnn) layer of the same name, field for field (parameters shared);
-- nn.SpatialConvolutionMM becomes a SpatialConvolution; modules for which exclusion_fn
-- returns true stay as they are. As cudnn.torch: containers are walked with replace, and an
-- nn.gModule is left with a warning (its own replace still converts its nodes' modules).
local check = require 'torch.core.check'

local convertible = {}
for _, name in ipairs {
  'BatchNormalization', 'SpatialBatchNormalization', 'VolumetricBatchNormalization',
  'SpatialConvolution', 'SpatialFullConvolution', 'VolumetricConvolution', 'VolumetricFullConvolution',
  'SpatialCrossMapLRN', 'SpatialMaxPooling', 'SpatialAveragePooling', 'VolumetricMaxPooling',
  'VolumetricAveragePooling', 'ReLU', 'Tanh', 'Sigmoid', 'SoftMax', 'LogSoftMax',
} do convertible[name] = true end

-- Layers of other packages that convert as one of the list.
local alike = { ['nn.SpatialConvolutionMM'] = 'SpatialConvolution',
                ['inn.SpatialCrossResponseNormalization'] = 'SpatialCrossMapLRN' }

function cudnn.convert(net, dst, exclusion_fn)
  if dst ~= nn and dst ~= cudnn then
    check.error('cudnn.convert: the destination must be nn or cudnn, got ' .. tostring(dst))
  end
  local srcPrefix, dstPrefix = dst == nn and 'cudnn.' or 'nn.', dst == nn and 'nn.' or 'cudnn.'
  return net:replace(function(x)
    if torch.type(x) == 'nn.gModule' then
      io.stderr:write('Warning: cudnn.convert does not work with nngraph yet. Ignoring nn.gModule\n')
      return x
    end
    if exclusion_fn and exclusion_fn(x) then return x end
    local typename = torch.typename(x) or ''
    local name = alike[typename]
    if not name and typename:sub(1, #srcPrefix) == srcPrefix and convertible[typename:sub(#srcPrefix + 1)] then
      name = typename:sub(#srcPrefix + 1)
    end
    if not name then return x end
    if dst == nn and (x.groups or 1) ~= 1 then
      check.error(('cudnn.convert: %s with %d groups has no nn counterpart'):format(typename, x.groups))
    end
    local y = name == 'ReLU' and dst.ReLU() or torch.factory(dstPrefix .. name)()
    for k, v in pairs(x) do y[k] = v end
    return y
  end)
end
