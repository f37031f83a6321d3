-- x * w elementwise, w a learned tensor of the given size, broadcast over its size-1 dims or
-- over a batch (see nn/util/broadcast.lua).
local broadcast = require 'nn.util.broadcast'
local CMul, parent = torch.class('nn.CMul', 'nn.Module')

broadcast.parameter(CMul, parent, 'weight', 'gradWeight', 'cmul')

function CMul:updateGradInput(input, gradOutput)
  if not self.gradInput then return end
  input = broadcast.contiguous(self, '_input', input)
  gradOutput = broadcast.contiguous(self, '_gradOutput', gradOutput)
  local x, w = broadcast.views(self, self.weight, input)
  local g = broadcast.views(self, self.weight, gradOutput)
  self.gradInput:resizeAs(input)
  self.gradInput:view(x:size()):cmul(g:view(x:size()), w)
  return self.gradInput
end

function CMul:accGradParameters(input, gradOutput, scale)
  input = broadcast.contiguous(self, '_input', input)
  gradOutput = broadcast.contiguous(self, '_gradOutput', gradOutput)
  local x, w = broadcast.views(self, self.weight, input)
  self._prod = self._prod or input.new()
  self._prod:resizeAs(x):cmul(x, gradOutput:view(x:size()))
  broadcast.accumulate(self.gradWeight, w, self._prod, scale or 1)
end

function CMul:clearState()
  return parent.clearState(self, '_input', '_gradOutput', '_prod')
end
