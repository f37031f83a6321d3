-- Per-plane loops over contiguous B x C x N data (N = the elements of one plane), shared by the
-- convolution biases and the batch normalizations.
local apply = require 'torch.backend.cpu.apply'

local planes = {}

-- four partial sums: one running sum would wait on each addition's latency
local sumLoops = apply.perType('planeSum', [[
return function(dst, dofs, dstride, src, so, B, C, N, scale)
  local N4 = N - N % 4
  for c = 0, C - 1 do
    local s0, s1, s2, s3 = 0, 0, 0, 0
    for b = 0, B - 1 do
      local o = so + (b * C + c) * N
      for k = 0, N4 - 1, 4 do
        s0, s1, s2, s3 = s0 + src[o + k], s1 + src[o + k + 1], s2 + src[o + k + 2], s3 + src[o + k + 3]
      end
      for k = N4, N - 1 do s0 = s0 + src[o + k] end
    end
    local s = (s0 + s1) + (s2 + s3)
    local d = dofs + c * dstride
    dst[d] = dst[d] + scale * s
  end
end]])

-- dst[c] += scale * (the sum of plane c over the batch); src contiguous, dst a 1-D tensor
function planes.accSum(dst, src, B, C, N, scale)
  sumLoops[src._dt](dst._st._ptr, dst._off, dst._str[1], src._st._ptr, src._off, B, C, N, scale)
end

local fillLoops = apply.perType('planeFill', [[
return function(dst, dofs, v, vo, vstride, B, C, N)
  for b = 0, B - 1 do
    for c = 0, C - 1 do
      local x = v[vo + c * vstride]
      local o = dofs + (b * C + c) * N
      for k = 0, N - 1 do dst[o + k] = x end
    end
  end
end]])

-- plane c of every batch item of dst (contiguous) = v[c] (a 1-D tensor)
function planes.fill(dst, v, B, C, N)
  fillLoops[dst._dt](dst._st._ptr, dst._off, v._st._ptr, v._off, v._str[1], B, C, N)
end

-- per-plane maps: 'affine' a = a * w[c] + b[c]; 'scale' a = x * w[c];
-- 'dot' w[c] += scale * sum of a * x over plane c (a, x contiguous B x C x N; w, b 1-D)
local mapLoops = apply.perType('planeMap', [[
return function(mode, ap, ao, xp, xo, wp, wo, ws, bp, bo, bs, B, C, N, scale)
  for c = 0, C - 1 do
    local w, d = wp[wo + c * ws], 0
    local sh = mode == 'affine' and bp[bo + c * bs] or 0
    for b = 0, B - 1 do
      local o = (b * C + c) * N
      if mode == 'affine' then
        for k = 0, N - 1 do ap[ao + o + k] = ap[ao + o + k] * w + sh end
      elseif mode == 'scale' then
        for k = 0, N - 1 do ap[ao + o + k] = xp[xo + o + k] * w end
      else
        for k = 0, N - 1 do d = d + ap[ao + o + k] * xp[xo + o + k] end
      end
    end
    if mode == 'dot' then wp[wo + c * ws] = w + scale * d end
  end
end]])

function planes.map(mode, a, x, w, b, B, C, N, scale)
  mapLoops[a._dt](mode, a._st._ptr, a._off, x and x._st._ptr, x and x._off or 0, w._st._ptr, w._off,
    w._str[1], b and b._st._ptr, b and b._off or 0, b and b._str[1] or 0, B, C, N, scale or 1)
end

return planes
