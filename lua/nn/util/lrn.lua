-- Local response normalization across channels of contiguous B x C x N data (SpatialCrossMapLRN):
-- scale[c] = k + alpha/size * sum of x[c']^2 over the channels c' in [c - pre, c + post]
-- (pre = floor((size-1)/2), post = size-1-pre), output = x * scale^-beta: the ops lrn_forward /
-- lrn_backward of the input's backend (backend/cpu/nn_lrn.lua, backend/cuda/nn_lrn.lua).
local backend = require 'torch.backend'

local lrn = {}

function lrn.forward(x, scale, out, B, C, N, size, alpha, beta, k)
  backend.of(x).lrn_forward(x, scale, out, B, C, N, size, alpha, beta, k)
end

function lrn.backward(x, g, scale, out, ratio, gi, B, C, N, size, alpha, beta)
  backend.of(x).lrn_backward(x, g, scale, out, ratio, gi, B, C, N, size, alpha, beta)
end

return lrn
