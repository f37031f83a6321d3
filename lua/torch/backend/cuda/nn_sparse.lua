-- The nn_sparse family on CUDA: SparseLinear and IndexLinear are CPU only. Their ops name the
-- tensor type a device tensor brings, with the words of the CPU loop (backend/cpu/nn_sparse.lua)
-- that a device tensor used to reach: where there is nothing to add, nothing is said.
local backend = require 'torch.backend'
local check = require 'torch.core.check'

local function refuse(coo, dst)
  if coo:size(1) > 0 then
    check.error(('sparse axpy: %s is not supported (a CPU loop)'):format(torch.typename(dst)))
  end
end

backend.register('cuda', {
  sparse_add_product = function(coo, _, out) refuse(coo, out) end,
  sparse_add_outer = function(coo, _, gradWeight) refuse(coo, gradWeight) end,
})
