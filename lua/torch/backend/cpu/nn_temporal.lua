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

-- CPU only: a device tensor reaching them gets the loop's error (TemporalConvolution runs the
-- CUDA ops temporal_conv_* of backend/cuda/nn_temporal.lua on device tensors)
backend.register('cpu', { temporal_add_frames = temporal.addFrames, temporal_subsample = temporal.subsample })

return temporal
