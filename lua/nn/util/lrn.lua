-- Local response normalization across channels of contiguous B x C x N data (SpatialCrossMapLRN):
-- scale[c] = k + alpha/size * sum of x[c']^2 over the channels c' in [c - pre, c + post]
-- (pre = floor((size-1)/2), post = size-1-pre), output = x * scale^-beta. CPU tensors run the ops
-- lrn_forward / lrn_backward (backend/cpu/nn_lrn.lua); device tensors the tensor ops below.
local backend = require 'torch.backend'
local planemaps = require 'nn.util.planemaps'

local lrn = {}

-- Device tensors: the sums over channel windows as one C x C matrix (row c: the window of c)
-- applied along the channels (planemaps.lua), the rest as tensor ops.
local function windows(C, size)
  local pre = (size - 1 - (size - 1) % 2) / 2
  return planemaps.matrix(C, C, function(c, add)
    for c2 = math.max(0, c - pre), math.min(C - 1, c + size - 1 - pre) do add(c2, 1) end
  end)
end

-- t (B x C x N, contiguous) with the channels last
local function channelsLast(t, B, C, N) return t:view(B, C, N):transpose(2, 3) end

local function deviceForward(x, scale, out, B, C, N, size, alpha, beta, k)
  out:cmul(x, x)
  planemaps.run(channelsLast(scale, B, C, N), channelsLast(out, B, C, N), false, windows(C, size))
  scale:mul(alpha / size):add(k)
  out:pow(scale, -beta):cmul(x)
end

local function deviceBackward(x, g, scale, out, ratio, gi, B, C, N, size, alpha, beta)
  ratio:cmul(g, out):cdiv(scale)
  planemaps.run(channelsLast(gi, B, C, N), channelsLast(ratio, B, C, N), true, windows(C, size))
  gi:cmul(x):mul(-2 * alpha * beta / size)
  gi:add(ratio:pow(scale, -beta):cmul(g))
end

function lrn.forward(x, scale, out, B, C, N, size, alpha, beta, k)
  if backend.of(x) ~= backend.cpu then return deviceForward(x, scale, out, B, C, N, size, alpha, beta, k) end
  backend.cpu.lrn_forward(x, scale, out, B, C, N, size, alpha, beta, k)
end

function lrn.backward(x, g, scale, out, ratio, gi, B, C, N, size, alpha, beta)
  if backend.of(x) ~= backend.cpu then return deviceBackward(x, g, scale, out, ratio, gi, B, C, N, size, alpha, beta) end
  backend.cpu.lrn_backward(x, g, scale, out, ratio, gi, B, C, N, size, alpha, beta)
end

return lrn
