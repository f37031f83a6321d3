-- The CUDA op table's fused elementwise chains (the CPU's: backend/cpu/nn_chain.lua): none.
-- chain_compile answers nil, so a gModule on CUDA tensors is not planned and runs its modules
-- layer by layer, as before plans. Nor does it share a plan's weight gradients with a second
-- thread (acc_async_ready answers false: the modules' own passes run).
local backend = require 'torch.backend'

backend.register('cuda', { chain_compile = function() return nil end,
  acc_async_ready = function() return false end,
  linear_acc_async = function() return false end,
  linear_forward_async = function() return false end,
  acc_pending = function() return false end,
  acc_wait = function() end })
