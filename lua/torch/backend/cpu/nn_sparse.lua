-- The CPU ops of SparseLinear and IndexLinear (sparse_add_product, sparse_add_outer): sparse
-- (coordinate list) products, where coo is a contiguous nnz x 3 tensor of
-- (row, col, value) rows with 1-based row/col, of the same element type as the dense operands.
local backend = require 'torch.backend'
local apply = require 'torch.backend.cpu.apply'
local loopsFor = require 'torch.backend.cpu.loops'

local sparse = {}

-- For each nonzero k: dst[a_k, j] += scale * value_k * src[b_k, j] over j < n, where a/b are the
-- coo fields fa/fb (0: row, 1: col) and each operand is addressed by (offset, stride of a/b, stride of j).
local axpy = loopsFor.perType('sparse axpy', [[
return function(cp, nnz, fa, fb, dp, dsa, dsj, sp, ssb, ssj, n, scale)
  for k = 0, nnz - 1 do
    local e = 3 * k
    local v = scale * cp[e + 2]
    if v ~= 0 then
      local d = (cp[e + fa] - 1) * dsa
      local s = (cp[e + fb] - 1) * ssb
      for j = 0, n - 1 do dp[d + j * dsj] = dp[d + j * dsj] + v * sp[s + j * ssj] end
    end
  end
end]])

local function run(coo, fa, fb, dst, dA, dJ, src, sB, sJ, n, scale)
  local ptr = apply.ptr
  axpy[torch.typename(dst)](ptr(coo), coo:size(1), fa, fb, ptr(dst), dst:stride(dA), dst:stride(dJ), ptr(src),
    src:stride(sB), src:stride(sJ), n, scale)
end

-- out (batch x outDim) += the sparse batch times weight' (weight: outDim x inDim)
function sparse.addProduct(coo, weight, out)
  if coo:size(1) > 0 then run(coo, 0, 1, out, 1, 2, weight, 2, 1, out:size(2), 1) end
end

-- gradWeight (outDim x inDim) += scale * gradOutput' (batch x outDim) times the sparse batch
function sparse.addOuter(coo, gradOutput, gradWeight, scale)
  if coo:size(1) > 0 then run(coo, 1, 0, gradWeight, 2, 1, gradOutput, 1, 2, gradWeight:size(1), scale) end
end

-- CPU only: a device tensor reaching them gets the loop's error
backend.register('cpu', { sparse_add_product = sparse.addProduct, sparse_add_outer = sparse.addOuter })

return sparse
