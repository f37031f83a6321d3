-- Loops of the temporal (frames x features) modules over contiguous data: the windows of kW
-- frames starting every dW frames, each kW*F elements long.
local backend = require 'torch.backend'
local loopsFor = require 'nn.util.loops'
local shape = require 'nn.util.shape'

local temporal = {}
local ptr = backend.cpu.ptr

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

-- Checks a frames x features input (frameSize features when given) with at least kW frames;
-- returns batch, B, frames in, frames out.
function temporal.frames(self, input, frameSize)
  if not torch.isTensor(input) or (input:dim() ~= 2 and input:dim() ~= 3) then
    shape.fail(self, 'expected 2D (frames x features) or 3D (batch x frames x features) input, got %s',
      torch.isTensor(input) and (input:dim() .. 'D input of size ' .. table.concat(input:size():totable(), 'x')) or torch.type(input))
  end
  local batch = input:dim() == 3
  local nIF, F = input:size(batch and 2 or 1), input:size(batch and 3 or 2)
  if frameSize and F ~= frameSize then
    shape.fail(self, 'expected frames of %d features, got %d (input size %s)', frameSize, F,
      table.concat(input:size():totable(), 'x'))
  end
  if nIF < self.kW then
    shape.fail(self, 'input of size %s has %d frames, fewer than the kernel width %d', 
      table.concat(input:size():totable(), 'x'), nIF, self.kW)
  end
  if self.weight and input:type() ~= self.weight:type() then
    shape.fail(self, 'input is a %s but the weight is a %s', torch.typename(input), torch.typename(self.weight))
  end
  return batch, batch and input:size(1) or 1, nIF, math.floor((nIF - self.kW) / self.dW) + 1
end

return temporal
