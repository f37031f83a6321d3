-- Per-plane loops over contiguous B x C x N data (N = the elements of one plane), shared by the
-- convolution biases and the subsampling modules: the CPU ops plane_acc_sum, plane_fill and
-- plane_map (SpatialSubSampling, TemporalConvolution) and the helpers of nn_conv.lua.
local backend = require 'torch.backend'
local apply = require 'torch.backend.cpu.apply'

local planes = {}
local ptr = apply.ptr

-- four partial sums: one running sum would wait on each addition's latency
local sumLoops = apply.perType('planeSum', [[
return function(dst, dstride, src, B, C, N, scale)
  local N4 = N - N % 4
  for c = 0, C - 1 do
    local s0, s1, s2, s3 = 0, 0, 0, 0
    for b = 0, B - 1 do
      local o = (b * C + c) * N
      for k = 0, N4 - 1, 4 do
        s0, s1, s2, s3 = s0 + src[o + k], s1 + src[o + k + 1], s2 + src[o + k + 2], s3 + src[o + k + 3]
      end
      for k = N4, N - 1 do s0 = s0 + src[o + k] end
    end
    local s = (s0 + s1) + (s2 + s3)
    local d = c * dstride
    dst[d] = dst[d] + scale * s
  end
end]])

-- dst[c] += scale * (the sum of plane c over the batch); src contiguous, dst a 1-D tensor
function planes.accSum(dst, src, B, C, N, scale)
  sumLoops[src._dt](ptr(dst), dst:stride(1), ptr(src), B, C, N, scale)
end

local fillLoops = apply.perType('planeFill', [[
return function(dst, v, vstride, B, C, N)
  for b = 0, B - 1 do
    for c = 0, C - 1 do
      local x = v[c * vstride]
      local o = (b * C + c) * N
      for k = 0, N - 1 do dst[o + k] = x end
    end
  end
end]])

-- plane c of every batch item of dst (contiguous) = v[c] (a 1-D tensor)
function planes.fill(dst, v, B, C, N)
  fillLoops[dst._dt](ptr(dst), ptr(v), v:stride(1), B, C, N)
end

-- per-plane maps: 'affine' a = a * w[c] + b[c]; 'scale' a = x * w[c];
-- 'dot' w[c] += scale * sum of a * x over plane c (a, x contiguous B x C x N; w, b 1-D)
local mapLoops = apply.perType('planeMap', [[
return function(mode, ap, xp, wp, ws, bp, bs, B, C, N, scale)
  for c = 0, C - 1 do
    local w, d = wp[c * ws], 0
    local sh = mode == 'affine' and bp[c * bs] or 0
    for b = 0, B - 1 do
      local o = (b * C + c) * N
      if mode == 'affine' then
        for k = 0, N - 1 do ap[o + k] = ap[o + k] * w + sh end
      elseif mode == 'scale' then
        for k = 0, N - 1 do ap[o + k] = xp[o + k] * w end
      else
        for k = 0, N - 1 do d = d + ap[o + k] * xp[o + k] end
      end
    end
    if mode == 'dot' then wp[c * ws] = w + scale * d end
  end
end]])

function planes.map(mode, a, x, w, b, B, C, N, scale)
  mapLoops[a._dt](mode, ptr(a), x and ptr(x), ptr(w), w:stride(1), b and ptr(b), b and b:stride(1) or 0,
    B, C, N, scale or 1)
end

backend.register('cpu', { plane_acc_sum = planes.accSum, plane_fill = planes.fill, plane_map = planes.map })

return planes
