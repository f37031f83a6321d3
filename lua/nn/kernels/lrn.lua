-- Local response normalization across channels of contiguous B x C x N data:
-- scale[c] = k + alpha/size * sum of x[c']^2 over the channels c' in [c - pre, c + post]
-- (pre = floor((size-1)/2), post = size-1-pre), output = x * scale^-beta.
local apply = require 'torch.backend.cpu.apply'

local lrn = {}

local forwardLoops = apply.perType('lrn forward', [[
local max, min = math.max, math.min
return function(xp, xo, sp, so, op, oo, B, C, N, size, alpha, beta, k)
  local pre = (size - 1 - (size - 1) % 2) / 2
  local post = size - 1 - pre
  for b = 0, B - 1 do
    for c = 0, C - 1 do
      local s = so + (b * C + c) * N
      for i = 0, N - 1 do sp[s + i] = 0 end
      for c2 = max(0, c - pre), min(C - 1, c + post) do
        local x = xo + (b * C + c2) * N
        for i = 0, N - 1 do sp[s + i] = sp[s + i] + xp[x + i] * xp[x + i] end
      end
      local x, o = xo + (b * C + c) * N, oo + (b * C + c) * N
      for i = 0, N - 1 do
        local v = k + alpha / size * sp[s + i]
        sp[s + i] = v
        op[o + i] = xp[x + i] * v ^ -beta
      end
    end
  end
end]])

-- gradInput[j] = g[j] * scale[j]^-beta - 2*alpha*beta/size * x[j] * sum of
-- g[c] * out[c] / scale[c] over the channels c whose window holds j; rp: a B x C x N buffer
local backwardLoops = apply.perType('lrn backward', [[
local max, min = math.max, math.min
return function(xp, xo, gp, go, sp, so, op, oo, rp, ro, ip, io, B, C, N, size, alpha, beta)
  local pre = (size - 1 - (size - 1) % 2) / 2
  local post = size - 1 - pre
  local f = 2 * alpha * beta / size
  for b = 0, B - 1 do
    local base = (b * C) * N
    for i = 0, C * N - 1 do
      rp[ro + base + i] = gp[go + base + i] * op[oo + base + i] / sp[so + base + i]
    end
    for c = 0, C - 1 do
      local q = (b * C + c) * N
      for i = 0, N - 1 do ip[io + q + i] = gp[go + q + i] * sp[so + q + i] ^ -beta end
      for c2 = max(0, c - post), min(C - 1, c + pre) do
        local r = ro + (b * C + c2) * N
        for i = 0, N - 1 do ip[io + q + i] = ip[io + q + i] - f * xp[xo + q + i] * rp[r + i] end
      end
    end
  end
end]])

local function at(t) return t._st._ptr, t._off end

function lrn.forward(x, scale, out, B, C, N, size, alpha, beta, k)
  local xp, xo = at(x)
  local sp, so = at(scale)
  local op, oo = at(out)
  forwardLoops[x._dt](xp, xo, sp, so, op, oo, B, C, N, size, alpha, beta, k)
end

function lrn.backward(x, g, scale, out, ratio, gi, B, C, N, size, alpha, beta)
  local xp, xo = at(x)
  local gp, go = at(g)
  local sp, so = at(scale)
  local op, oo = at(out)
  local rp, ro = at(ratio)
  local ip, io = at(gi)
  backwardLoops[x._dt](xp, xo, gp, go, sp, so, op, oo, rp, ro, ip, io, B, C, N, size, alpha, beta)
end

return lrn
