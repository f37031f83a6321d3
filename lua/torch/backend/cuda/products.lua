-- The CUDA op table's products, marshalled to the array module (luabridge/backend/cuda.py's
-- gemm, matmul there); the methods are math/blas.lua's, the one front end.
local C = require 'torch.backend.cuda.core'
local call, Methods = C.call, C.Methods

require('torch.backend').register('cuda', {
  -- r = beta * m + alpha * a . b; two vectors make the outer product (a column times a row)
  gemm = function(r, beta, m, alpha, a, b, batchSum)
    if #a._sz == 1 and #b._sz == 1 then a, b = a:unsqueeze(2), b:unsqueeze(1) end
    call('gemm', r, beta, m, alpha, a, b, batchSum or false)
  end,
  dot = function(a, b) return call('dot', a, b) end,
})

for _, name in ipairs { 'addmm', 'addmv', 'addr', 'addbmm', 'baddbmm', 'mm', 'mv', 'bmm', 'ger', 'dot' } do
  Methods[name] = C.torch._TensorMethods[name]
end
