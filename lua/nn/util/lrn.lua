-- Local response normalization across channels of contiguous B x C x N data:
-- scale[c] = k + alpha/size * sum of x[c']^2 over the channels c' in [c - pre, c + post]
-- (pre = floor((size-1)/2), post = size-1-pre), output = x * scale^-beta.
local backend = require 'torch.backend'
local loopsFor = require 'nn.util.loops'
local planemaps = require 'nn.util.planemaps'

local lrn = {}

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

local ptr = backend.cpu.ptr

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
  forwardLoops[torch.typename(x)](ptr(x), ptr(scale), ptr(out), B, C, N, size, alpha, beta, k)
end

function lrn.backward(x, g, scale, out, ratio, gi, B, C, N, size, alpha, beta)
  if backend.of(x) ~= backend.cpu then return deviceBackward(x, g, scale, out, ratio, gi, B, C, N, size, alpha, beta) end
  backwardLoops[torch.typename(x)](ptr(x), ptr(g), ptr(scale), ptr(out), ptr(ratio), ptr(gi), B, C, N, size, alpha, beta)
end

return lrn
