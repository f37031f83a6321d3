-- cunn: nn on CUDA tensors. With a device, module:cuda() converts to torch.CudaTensor; with
-- LUABRIDGE_CUDA_ON_CPU=1 (see cutorch) module:cuda() and criterion:cuda() convert to
-- FloatTensor, the type CUDA tensors stand for on the CPU.
local ok, err = pcall(require, 'cutorch')
if not ok then package.loaded.cunn = nil; error(err, 0) end   -- no sentinel left (see cutorch)
require 'nn'

cunn = rawget(_G, 'cunn') or {}

if cutorch.onCPU then
  function nn.Module:cuda() return self:float() end
  function nn.Criterion:cuda() return self:float() end
end

return cunn
