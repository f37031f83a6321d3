-- The CUDA op table's sorts, marshalled to the array module (luabridge/backend/cuda.py's sort,
-- topk, kthvalue, mode; 0-based dims there); the methods are math/sort.lua's, the one front end.
local C = require 'torch.backend.cuda.core'
local call = C.call

require('torch.backend').register('cuda', {
  sort = function(r, idx, a, dim, descending) call('sort', r, idx, a, dim - 1, descending) end,
  topk = function(r, idx, a, k, dim, largest) call('topk', r, idx, a, k, dim - 1, largest) end,
  kthvalue = function(r, idx, a, k, dim) call('kthvalue', r, idx, a, k, dim - 1) end,
  mode = function(r, idx, a, dim) call('mode', r, idx, a, dim - 1) end,
})

for _, name in ipairs { 'sort', 'topk', 'kthvalue', 'median', 'mode' } do
  C.Methods[name] = C.Tensor[name]
end
