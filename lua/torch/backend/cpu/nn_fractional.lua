-- The CPU ops of SpatialFractionalMaxPooling (fractional_max_forward, fractional_max_backward):
-- fractional max pooling (Graham 2014) over P planes of A x B x C elements: each plane draws one
-- uniform sample per pooled dimension, which places outN windows of poolN elements
-- pseudo-randomly along that dimension (2D pooling is the A = 1 case). Indices are torch7's:
-- 1-based flat offsets inside a plane.
local backend = require 'torch.backend'
local apply = require 'torch.backend.cpu.apply'
local loopsFor = require 'torch.backend.cpu.loops'

local fractional = {}

-- The window starts along one dimension for sample u: floor((i + u) * alpha) - floor(u * alpha),
-- alpha = (size - pool) / (out - 1), the last window ending at the border. Fills starts[1..out].
local function intervals(starts, u, size, out, pool)
  if out > 1 then
    local alpha = (size - pool) / (out - 1)
    local base = math.floor(u * alpha)
    for i = 0, out - 2 do starts[i + 1] = math.floor((i + u) * alpha) - base end
  end
  starts[out] = size - pool
  return starts
end
fractional.intervals = intervals

local forward = loopsFor.perType('fractional max pooling', [[
return function(ip, op, xp, A, B, C, oA, oB, oC, kA, kB, kC, sA, sB, sC)
  local huge = math.huge
  local o = 0
  for a = 1, oA do
    for b = 1, oB do
      for c = 1, oC do
        local best, at = -huge, -1
        for a2 = sA[a], sA[a] + kA - 1 do
          for b2 = sB[b], sB[b] + kB - 1 do
            local row = (a2 * B + b2) * C
            for c2 = sC[c], sC[c] + kC - 1 do
              local v = ip[row + c2]
              if v > best or at < 0 then best, at = v, row + c2 end
            end
          end
        end
        op[o] = best
        xp[o] = at + 1
        o = o + 1
      end
    end
  end
end]])

local backward = loopsFor.perType('fractional max pooling backward', [[
return function(gp, dp, xp, n)
  for k = 0, n - 1 do
    local at = tonumber(xp[k]) - 1
    gp[at] = gp[at] + dp[k]
  end
end]])

-- input (P x A x B x C, contiguous), output (P x oA x oB x oC), indices (Long, same size as
-- output); samples (P x nS) gives per plane the sample index of each pooled dimension (dims,
-- {a, b, c}, 0 for none); out, pool: {oA, oB, oC}, {kA, kB, kC}.
function fractional.forward(input, output, indices, samples, dims, out, pool)
  local P, A, B, C = input:size(1), input:size(2), input:size(3), input:size(4)
  local sizes = { A, B, C }
  local starts = { {}, {}, {} }
  local run, ptr = forward[torch.typename(input)], apply.ptr
  local planeIn, planeOut = A * B * C, out[1] * out[2] * out[3]
  for p = 1, P do
    for d = 1, 3 do
      local u = dims[d] > 0 and samples[p][dims[d]] or 0
      intervals(starts[d], u, sizes[d], out[d], pool[d])
    end
    run(ptr(input) + (p - 1) * planeIn, ptr(output) + (p - 1) * planeOut,
      ptr(indices) + (p - 1) * planeOut, A, B, C, out[1], out[2], out[3],
      pool[1], pool[2], pool[3], starts[1], starts[2], starts[3])
  end
end

-- gradInput (P x planeIn, contiguous, zeroed) += gradOutput scattered through indices
function fractional.backward(gradInput, gradOutput, indices)
  local P, planeIn = gradInput:size(1), gradInput:nElement() / math.max(gradInput:size(1), 1)
  local planeOut = gradOutput:nElement() / math.max(P, 1)
  local run, ptr = backward[torch.typename(gradInput)], apply.ptr
  for p = 1, P do
    run(ptr(gradInput) + (p - 1) * planeIn, ptr(gradOutput) + (p - 1) * planeOut,
      ptr(indices) + (p - 1) * planeOut, planeOut)
  end
end

-- CPU only: a device tensor reaching them gets the loop's error
backend.register('cpu', { fractional_max_forward = fractional.forward, fractional_max_backward = fractional.backward })

return fractional
