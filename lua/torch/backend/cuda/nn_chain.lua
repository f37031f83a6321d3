-- The CUDA op table's fused elementwise chains (the CPU's: backend/cpu/nn_chain.lua): none.
-- chain_compile answers nil, so a gModule on CUDA tensors is not planned and runs its modules
-- layer by layer, as before plans.
local backend = require 'torch.backend'

backend.register('cuda', { chain_compile = function() return nil end })
