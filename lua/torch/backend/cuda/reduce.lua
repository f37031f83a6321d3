-- The CUDA op table's reductions, marshalled to the array module (luabridge/backend/cuda.py's
-- reduce_all, reduce_dim, argreduce, scan, equal, minmax; 0-based dims there); the methods are
-- math/reduce.lua's, the one front end (histc and bhistc: math/join.lua's, the op: join.lua).
local C = require 'torch.backend.cuda.core'
local call, copyArray = C.call, C.copyArray

require('torch.backend').register('cuda', {
  reduce_all = function(name, a, p) return call('reduce_all', name, a, p) end,
  reduce_dim = function(name, r, a, dim, p) call('reduce_dim', name, r, a, dim - 1, p) end,
  argreduce = function(name, r, idx, a, dim) call('argreduce', name, r, idx, a, dim - 1) end,
  scan = function(name, r, a, dim) call('scan', name, r, a, dim - 1) end,
  equal = function(a, b) return call('equal', a, b) end,
  minmax = function(a) return call('minmax', a) end,
  -- the p-norm of a - b (the difference in a's type, the norm accumulated in double)
  dist = function(a, b, p)
    local d = a.new():resize(copyArray(a._sz))
    call('add', d, a, -1, b)
    return call('reduce_all', 'norm', d, p)
  end,
  -- slice by slice along dim: its norm, then a scaled copy where the norm exceeds maxnorm
  renorm = function(r, a, p, dim, maxnorm)
    for i = 1, a._sz[dim] do
      local row, out = a:select(dim, i), r:select(dim, i)
      local norm = call('reduce_all', 'norm', row, p)
      if norm > maxnorm then call('binary', 'mul', out, row, maxnorm / (norm + 1e-7))
      elseif r ~= a then call('copy', out, row) end
    end
  end,
})

for _, name in ipairs { 'sum', 'prod', 'mean', 'var', 'std', 'norm', 'all', 'any', 'max', 'min', 'cumsum',
                        'cumprod', 'dist', 'renorm', 'equal', 'trace', 'histc', 'bhistc' } do
  C.Methods[name] = C.Tensor[name]
end
