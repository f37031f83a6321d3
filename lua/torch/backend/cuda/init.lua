-- The CUDA backend: the tensor types and conversions over core.lua, with the op families (the
-- same names as backend/cpu/'s: torch.backend.families).
local C = require 'torch.backend.cuda.core'
local torch, check, Tensor, make, Methods = C.torch, C.check, C.Tensor, C.make, C.Methods
local call, copyArray, dtypes, tensorMts, storageMts = C.call, C.copyArray, C.dtypes, C.tensorMts, C.storageMts

for _, family in ipairs(require('torch.backend').families) do
  require('torch.backend.cuda.' .. family)
end

------------------------------------------------------------------------------------------------
-- the tensor types

-- torch.CudaTensor({...}): the table's values through a CPU tensor of the host type.
local function fromTable(mt, tbl)
  local h = torch[mt.__dtype.host.name .. 'Tensor'](tbl)
  return make(mt):resize(copyArray(h._sz)):copy(h)
end

-- t[k] as on the CPU (CUDA masks and indices too); CPU methods the CUDA types lack say so.
local function index(t, k)
  if type(k) == 'string' and Tensor[k] ~= nil and k:sub(1, 1) ~= '_' then
    return function() check.error(('%s: not supported for CUDA tensors'):format(k)) end
  end
  return torch._tensorIndex(t, k)
end

for _, dt in pairs(dtypes) do
  tensorMts[dt.name] = torch._newTensorClass(dt, Methods, index, torch._tensorNewIndex,
                                             { _device = 'cuda', __fromTable = fromTable })
end

------------------------------------------------------------------------------------------------
-- conversions: x:cuda() (float), x:cudaDouble(), x:cudaLong(), ... on every tensor type

-- The conversion method to a CUDA type: cutorch's names, the type's name in lower camel case.
local function converterName(dt) return dt.name:sub(1, 1):lower() .. dt.name:sub(2) end

local converters = {}
for _, dt in pairs(dtypes) do
  converters[converterName(dt)] = function(t) return t:type(dt.tensor) end
end
for name, fn in pairs(converters) do
  torch._method(name, fn)
  for _, mt in pairs(tensorMts) do mt[name] = fn end
end

-- call: for the device passes of other libraries (nn; luabridge/backend/cuda_nn.py)
return { dtypes = dtypes, tensorMetatables = tensorMts, storageMetatables = storageMts, call = call,
         converterName = converterName }
