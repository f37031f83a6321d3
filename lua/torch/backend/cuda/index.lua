-- CUDA indexing: the op table's indexing ops as calls of the Python ops (0-based dims), and the
-- one front end (math/index.lua) as the CUDA types' methods. Index and mask operands may be on
-- the host or the device: the Python side reads both.
local C = require 'torch.backend.cuda.core'
local backend = require 'torch.backend'
local call = C.call

backend.register('cuda', {
  index_select = function(r, a, dim, idx) call('index_select', r, a, dim - 1, idx) end,
  index_copy = function(r, dim, idx, a) call('index_copy', r, dim - 1, idx, a) end,
  index_add = function(r, dim, idx, a) call('index_add', r, dim - 1, idx, a) end,
  index_fill = function(r, dim, idx, v) call('index_fill', r, dim - 1, idx, v) end,
  gather = function(r, a, dim, idx) call('gather', r, a, dim - 1, idx) end,
  scatter = function(r, dim, idx, a) call('scatter', r, dim - 1, idx, a) end,
  masked_fill = function(r, mask, v) call('masked_fill', r, mask, v) end,
  masked_copy = function(r, mask, a) call('masked_copy', r, mask, a) end,
  masked_select = function(r, a, mask) call('masked_select', r, a, mask) end,
  count_nonzero = function(a) return call('count_nonzero', a) end,
  nonzero = function(r, a) call('nonzero', r, a) end,
})

for _, name in ipairs { 'index', 'indexCopy', 'indexAdd', 'indexFill', 'gather', 'scatter', 'maskedFill',
                        'maskedCopy', 'maskedSelect', 'nonzero' } do
  C.Methods[name] = C.Tensor[name]
end
