-- The checks shared by the temporal (frames x features) modules (their CPU loops: the ops
-- temporal_add_frames and temporal_subsample, backend/cpu/nn_temporal.lua).
local shape = require 'nn.util.shape'

local temporal = {}

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
