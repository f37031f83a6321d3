-- The CPU ops of the temporal (frames x features) modules (temporal_add_frames,
-- temporal_subsample): loops over contiguous data, the windows of kW frames starting every dW
-- frames, each kW*F elements long.
local backend = require 'torch.backend'
local loopsFor = require 'torch.backend.cpu.loops'

local temporal = {}
local ptr = require('torch.backend.cpu.apply').ptr

-- gi[b] (nIF x F) += each row t of buf[b] (nOF x K, K = kW*F) at frame t*dW
local addFrames = loopsFor.perType('temporal addFrames', [[
return function(bp, gp, B, nIF, nOF, F, K, dW)
  for b = 0, B - 1 do
    for t = 0, nOF - 1 do
      local s, d = (b * nOF + t) * K, b * nIF * F + t * dW * F
      for i = 0, K - 1 do gp[d + i] = gp[d + i] + bp[s + i] end
    end
  end
end]])

function temporal.addFrames(buf, gi, B, nIF, nOF, F, K, dW)
  addFrames[torch.typename(buf)](ptr(buf), ptr(gi), B, nIF, nOF, F, K, dW)
end

-- TemporalSubSampling: out[t, f] = bias[f] + weight[f] * (the sum of x[t*dW + k, f], k < kW);
-- mode 'forward', 'backward' (gi += weight * g over each window; gi zeroed) or 'acc'
-- (gradWeight[f] += scale * sum g * window sum, gradBias[f] += scale * sum g)
local subsample = loopsFor.perType('temporal subsampling', [[
return function(mode, xp, op, wp, ws, bp, bs, nIF, nOF, F, kW, dW, scale)
  for t = 0, nOF - 1 do
    for f = 0, F - 1 do
      local o = t * F + f
      local x = t * dW * F + f
      if mode == 'backward' then
        local g = wp[f * ws] * op[o]
        for k = 0, kW - 1 do xp[x + k * F] = xp[x + k * F] + g end
      else
        local s = 0
        for k = 0, kW - 1 do s = s + xp[x + k * F] end
        if mode == 'forward' then op[o] = bp[f * bs] + wp[f * ws] * s
        else
          wp[f * ws] = wp[f * ws] + scale * op[o] * s
          bp[f * bs] = bp[f * bs] + scale * op[o]
        end
      end
    end
  end
end]])

-- x, o contiguous (nIF x F, nOF x F); w, b 1-D (weight and bias, or their gradients)
function temporal.subsample(mode, x, o, w, b, nIF, nOF, F, kW, dW, scale)
  subsample[torch.typename(x)](mode, ptr(x), ptr(o), ptr(w), w:stride(1), b and ptr(b), b and b:stride(1) or 0,
    nIF, nOF, F, kW, dW, scale or 1)
end

-- nn.TemporalConvolution on batches (x B x nIF x F contiguous, out and gradOutput B x nOF x O,
-- the weight O x kW*F), as the CUDA ops of backend/cuda/nn_temporal.lua: each window of kW frames
-- is kW*F contiguous elements, so the windows are a strided view of x multiplied by the weight in
-- one GEMM per sequence.

-- the windows of x (B x nIF x F, contiguous) as a B x nOF x K view
local function windows(x, nOF, K, dW)
  local B, nIF, F = x:size(1), x:size(2), x:size(3)
  return x.new():set(x:storage(), x:storageOffset(), torch.LongStorage { B, nOF, K },
    torch.LongStorage { nIF * F, dW * F, 1 })
end

function temporal.convForward(out, x, weight, bias, kW, dW)
  local B, nOF, O, K = out:size(1), out:size(2), out:size(3), x:size(3) * kW
  backend.cpu.plane_fill(out, bias, B * nOF, O, 1)
  local w = weight:contiguous():view(1, O, K):expand(B, O, K):transpose(2, 3)
  out:baddbmm(1, out, 1, windows(x, nOF, K, dW), w)
end

-- gi (B x nIF x F, contiguous) = the windows' gradients (a buffer per element type) added at
-- their frames
local windowGrads = {}
function temporal.convGradInput(gi, g, weight, kW, dW)
  local B, nIF, F = gi:size(1), gi:size(2), gi:size(3)
  local nOF, O, K = g:size(2), g:size(3), F * kW
  local buf = windowGrads[torch.typename(g)] or g.new()
  windowGrads[torch.typename(g)] = buf
  buf:resize(B, nOF, K):bmm(g, weight:contiguous():view(1, O, K):expand(B, O, K))
  gi:zero()
  temporal.addFrames(buf, gi, B, nIF, nOF, F, K, dW)
end

-- gradWeight (contiguous: the module checks) += scale g^T windows; gradBias += scale sum g
function temporal.convAccGrad(gradWeight, gradBias, x, g, scale, kW, dW)
  local B, nOF, O = g:size(1), g:size(2), g:size(3)
  gradWeight:addbmm(scale, g:transpose(2, 3), windows(x, nOF, x:size(3) * kW, dW))
  backend.cpu.plane_acc_sum(gradBias, g, B * nOF, O, 1, scale)
end

backend.register('cpu', { temporal_add_frames = temporal.addFrames, temporal_subsample = temporal.subsample,
                          temporal_conv_forward = temporal.convForward,
                          temporal_conv_grad_input = temporal.convGradInput,
                          temporal_conv_acc_grad = temporal.convAccGrad })

return temporal
