-- cudnn: the cuDNN-backed layers, here the nn layers themselves: cudnn.X is nn.X for each layer
-- whose objects in .t7 files are read as nn.X (torch.File.classAliases, see lua/nn/legacy.lua;
-- a module made by cudnn.SpatialConvolution(...) is an nn.SpatialConvolution),
-- so cudnn.convert(net, ...) has nothing to change. cudnn.benchmark / fastest / verbose are
-- accepted settings with no effect.
require 'cunn'

cudnn = rawget(_G, 'cudnn') or {}
cudnn.benchmark, cudnn.fastest, cudnn.verbose = false, false, false

local aliased = { SpatialCrossEntropyCriterion = true }   -- not in nn: an error says so
for name, target in pairs(torch.File.classAliases) do
  local short = name:match('^cudnn%.(.+)$')
  if short and target == 'nn.' .. short then aliased[short] = true end
end

-- Looked up on use, so that nn layers loaded after cudnn are found too.
setmetatable(cudnn, { __index = function(_, name)
  if aliased[name] then
    local class = rawget(nn, name)
    if class == nil then error(('cudnn.%s: nn.%s is not available in luabridge'):format(name, name), 2) end
    return class
  end
end })

-- cudnn.ClippedReLU(ceiling): min(max(x, 0), ceiling).
function cudnn.ClippedReLU(ceiling, inplace) return nn.Clamp(0, ceiling) end

-- Nothing to swap: the cudnn layers are the nn layers.
function cudnn.convert(net, dst, exclude) return net end

return cudnn
