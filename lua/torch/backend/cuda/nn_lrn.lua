-- The CUDA op table's local response normalization (SpatialCrossMapLRN; the CPU ops:
-- backend/cpu/nn_lrn.lua, the same arguments): the sums over channel windows as one C x C matrix
-- (row c: the window of c) applied along the channels (planemaps.lua), the rest as tensor ops.
-- x, scale, out, ratio, gi are contiguous B x C x N.
local backend = require 'torch.backend'
local planemaps = require 'torch.backend.cuda.planemaps'

local function windows(C, size)
  local pre = (size - 1 - (size - 1) % 2) / 2
  return planemaps.matrix(C, C, function(c, add)
    for c2 = math.max(0, c - pre), math.min(C - 1, c + size - 1 - pre) do add(c2, 1) end
  end)
end

-- t (B x C x N, contiguous) with the channels last
local function channelsLast(t, B, C, N) return t:view(B, C, N):transpose(2, 3) end

backend.register('cuda', {
  lrn_forward = function(x, scale, out, B, C, N, size, alpha, beta, k)
    out:cmul(x, x)
    planemaps.run(channelsLast(scale, B, C, N), channelsLast(out, B, C, N), false, windows(C, size))
    scale:mul(alpha / size):add(k)
    out:pow(scale, -beta):cmul(x)
  end,
  lrn_backward = function(x, g, scale, out, ratio, gi, B, C, N, size, alpha, beta)
    ratio:cmul(g, out):cdiv(scale)
    planemaps.run(channelsLast(gi, B, C, N), channelsLast(ratio, B, C, N), true, windows(C, size))
    gi:cmul(x):mul(-2 * alpha * beta / size)
    gi:add(ratio:pow(scale, -beta):cmul(g))
  end,
})
