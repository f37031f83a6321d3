-- x + b elementwise, b a learned tensor of the given size, broadcast over its size-1 dims or
-- over a batch (see nn/util/broadcast.lua).
local broadcast = require 'nn.util.broadcast'
local CAdd, parent = torch.class('nn.CAdd', 'nn.Module')

broadcast.parameter(CAdd, parent, 'bias', 'gradBias', 'add')

function CAdd:updateGradInput(input, gradOutput)
  self.gradInput:resizeAs(gradOutput):copy(gradOutput)
  return self.gradInput
end

function CAdd:accGradParameters(input, gradOutput, scale)
  gradOutput = broadcast.contiguous(self, '_gradOutput', gradOutput)
  local g, b = broadcast.views(self, self.bias, gradOutput)
  broadcast.accumulate(self.gradBias, b, g, scale or 1)
end

function CAdd:clearState()
  return parent.clearState(self, '_input', '_gradOutput')
end
