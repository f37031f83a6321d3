-- The CPU ops of SpatialCrossMapLRN (lrn_forward, lrn_backward; the CUDA ones, tensor ops and
-- plane maps: backend/cuda/nn_lrn.lua): local response normalization across channels of contiguous B x C x N data:
-- scale[c] = k + alpha/size * sum of x[c']^2 over the channels c' in [c - pre, c + post]
-- (pre = floor((size-1)/2), post = size-1-pre), output = x * scale^-beta.
local backend = require 'torch.backend'
local loopsFor = require 'torch.backend.cpu.loops'

local forwardLoops = loopsFor.perType('lrn forward', [[
local max, min = math.max, math.min
return function(xp, sp, op, B, C, N, size, alpha, beta, k)
  local pre = (size - 1 - (size - 1) % 2) / 2
  local post = size - 1 - pre
  for b = 0, B - 1 do
    for c = 0, C - 1 do
      local s = (b * C + c) * N
      for i = 0, N - 1 do sp[s + i] = 0 end
      for c2 = max(0, c - pre), min(C - 1, c + post) do
        local x = (b * C + c2) * N
        for i = 0, N - 1 do sp[s + i] = sp[s + i] + xp[x + i] * xp[x + i] end
      end
      local x = (b * C + c) * N
      for i = 0, N - 1 do
        local v = k + alpha / size * sp[s + i]
        sp[s + i] = v
        op[x + i] = xp[x + i] * v ^ -beta
      end
    end
  end
end]])

-- gradInput[j] = g[j] * scale[j]^-beta - 2*alpha*beta/size * x[j] * sum of
-- g[c] * out[c] / scale[c] over the channels c whose window holds j; rp: a B x C x N buffer
local backwardLoops = loopsFor.perType('lrn backward', [[
local max, min = math.max, math.min
return function(xp, gp, sp, op, rp, ip, B, C, N, size, alpha, beta)
  local pre = (size - 1 - (size - 1) % 2) / 2
  local post = size - 1 - pre
  local f = 2 * alpha * beta / size
  for b = 0, B - 1 do
    local base = (b * C) * N
    for i = 0, C * N - 1 do
      rp[base + i] = gp[base + i] * op[base + i] / sp[base + i]
    end
    for c = 0, C - 1 do
      local q = (b * C + c) * N
      for i = 0, N - 1 do ip[q + i] = gp[q + i] * sp[q + i] ^ -beta end
      for c2 = max(0, c - post), min(C - 1, c + pre) do
        local r = (b * C + c2) * N
        for i = 0, N - 1 do ip[q + i] = ip[q + i] - f * xp[q + i] * rp[r + i] end
      end
    end
  end
end]])

local ptr = require('torch.backend.cpu.apply').ptr
local dnnlLrn = require 'torch.backend.cpu.dnnl_lrn'

-- Float data of an odd size runs on oneDNN where it is installed (dnnl_lrn.lua), on all threads.
backend.register('cpu', {
  lrn_forward = function(x, scale, out, B, C, N, size, alpha, beta, k)
    if dnnlLrn.forward(x, scale, out, B, C, N, size, alpha, beta, k) then return end
    forwardLoops[torch.typename(x)](ptr(x), ptr(scale), ptr(out), B, C, N, size, alpha, beta, k)
  end,
  lrn_backward = function(x, g, scale, out, ratio, gi, B, C, N, size, alpha, beta)
    if dnnlLrn.backward(x, g, scale, gi, B, C, N, size, alpha, beta) then return end
    backwardLoops[torch.typename(x)](ptr(x), ptr(g), ptr(scale), ptr(out), ptr(ratio), ptr(gi), B, C, N, size,
      alpha, beta)
  end,
})
