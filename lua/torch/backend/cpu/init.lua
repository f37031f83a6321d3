-- The CPU backend: LuaJIT loops compiled per element type (apply.lua), numpy's SIMD loops
-- (ufunc.lua), OpenBLAS and LAPACK (blas.lua) and oneDNN (dnnl.lua) through the FFI. Every family
-- of backend.families registers its ops on backend.cpu; the helpers beside them (apply, loops,
-- ufunc, blas, dnnl, dnnl_nn, unfold, planes, signals) serve the families (apply, ufunc, unfold
-- and planes register a few ops of their own).
local backend = require 'torch.backend'
require 'torch.backend.cpu.apply'   -- registers the kernel builders (kernel perType ptr ...) too
require 'torch.backend.cpu.ufunc'   -- and numpy's loops (ufunc_loop ufunc_unary ...)
for _, family in ipairs(backend.families) do require('torch.backend.cpu.' .. family) end
return backend.cpu
