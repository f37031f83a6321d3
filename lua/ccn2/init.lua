-- ccn2: soumith/cuda-convnet2.torch's layers (Alex Krizhevsky's cuda-convnet2 kernels) on luabridge,
-- computed with nn's CPU code on CUDA tensors or, with LUABRIDGE_CUDA_ON_CPU=1, on the CPU.
-- Their tensors are laid out as cuda-convnet2's: planes x height x width x batch (models put an
-- nn.Transpose before and after them), images square and batches a multiple of 32, as
-- ccn2.inputcheck asserts. SpatialConvolution (groups, cuda-convnet2's weight layout
-- (nInputPlane/groups * kH * kH) x nOutputPlane, its rounded-up output size),
-- SpatialMaxPooling and SpatialCrossResponseNormalization are provided.
local ok, err = pcall(require, 'cunn')
if not ok then package.loaded.ccn2 = nil; error(err, 0) end   -- no sentinel left (see cutorch)

ccn2 = rawget(_G, 'ccn2') or {}

function ccn2.typecheck(i)
  if torch.type(i) ~= torch.type(torch.CudaTensor()) then
    error('Input is expected to be torch.CudaTensor, got ' .. torch.type(i), 2)
  end
end

function ccn2.inputcheck(i)
  if i:dim() ~= 4 then
    error('ccn2: input must be planes x height x width x batch (4 dimensions), got ' .. i:dim(), 2)
  end
  if i:size(2) ~= i:size(3) then
    error('Assertion failed: [i:size(2) == i:size(3)]. Only square images supported by this module!', 2)
  end
  if math.fmod(i:size(4), 32) ~= 0 then
    error('Assertion failed: [i:size(4) % 32 == 0]. Only batchSizes which are a multiple of 32 are supported.', 2)
  end
end

-- planes x h x w x batch <-> batch x planes x h x w
function ccn2.toBatchFirst(x) return x:permute(4, 1, 2, 3):contiguous() end
function ccn2.toBatchLast(x) return x:permute(2, 3, 4, 1):contiguous() end

require 'ccn2.SpatialConvolution'
require 'ccn2.SpatialMaxPooling'
require 'ccn2.SpatialCrossResponseNormalization'

return ccn2
