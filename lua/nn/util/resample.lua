-- Upsampling of P planes of H x W to oH x oW: nearest neighbour (integer scale) and bilinear
-- with the corners aligned (output y reads input y * (H-1)/(oH-1)), forward and backward: the op
-- resample of the tensors' backend (backend/cpu/nn_resample.lua, backend/cuda/nn_resample.lua).
local backend = require 'torch.backend'

local resample = {}

-- small: P x H x W, big: P x oH x oW (both contiguous); forward writes big, backward small.
function resample.run(mode, small, big, P, H, W, oH, oW, scale, backward)
  backend.of(small).resample(mode, small, big, P, H, W, oH, oW, scale, backward)
end

return resample
