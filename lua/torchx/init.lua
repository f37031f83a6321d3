-- torchx: Nicholas Leonard's torch extensions (pure Lua), which rnn and dpnn require: torch.find,
-- torch.group, torch.concat, torch.remap, torch.treemax, torch.md5, torch.json, paths.indexdir,
-- torchx.recursive*, torchx.Queue and torch.AliasMultinomial (dpnn's, one implementation).
require 'torch'
require 'paths'
require 'sys'

torchx = (type(torchx) == 'table' and not torch.typename(torchx)) and torchx or {}
torchx.version = 1

-- Copies funcs into the method tables of types ('Float' names torch.FloatTensor when alias).
function torchx.extend(types, funcs, alias)
  for _, name in ipairs(types) do
    local methods = torch.getmetatable(alias and ('torch.' .. name .. 'Tensor') or name)
    if not methods then error('torchx.extend: unknown type ' .. tostring(name), 2) end
    for funcname, func in pairs(funcs) do rawset(methods, funcname, func) end
  end
end

for _, name in ipairs({ 'md5', 'json', 'find', 'group', 'concat', 'remap', 'treemax', 'indexdir',
                        'recursivetensor', 'Queue' }) do
  require('torchx.' .. name)
end
require 'dpnn.AliasMultinomial'

-- tensor:concat(tensors[, dim]) on every CPU tensor type; torchx:cuda() adds it to CudaTensor.
local methods = { concat = torch.concat }
torchx.extend({ 'Byte', 'Char', 'Short', 'Int', 'Long', 'Float', 'Double' }, methods, true)
function torchx:cuda()
  require 'cutorch'
  torchx.extend({ 'Cuda' }, methods, true)
end

-- torchx's own suite: dofile(<torchx checkout>/test/test.lua) defines torchx.test(tests).
return torchx
