-- x + b elementwise, b a learned tensor of the given size, broadcast over its size-1 dims or
-- over a batch (see kernels/broadcast.lua).
local broadcast = require 'nn.kernels.broadcast'
local CAdd, parent = torch.class('nn.CAdd', 'nn.Module')

function CAdd:__init(...)
  parent.__init(self)
  local args = { ... }
  if #args == 1 and torch.type(args[1]) == 'torch.LongStorage' then
    self.size = torch.LongStorage():resize(#args[1]):copy(args[1])
  else
    self.size = torch.LongStorage(args)
  end
  self.bias = torch.Tensor(self.size)
  self.gradBias = torch.Tensor(self.size)
  self.output:resize(self.size)
  self:reset()
end

function CAdd:reset(stdv)
  stdv = stdv and stdv * math.sqrt(3) or 1 / math.sqrt(self.bias:nElement())
  self.bias:uniform(-stdv, stdv)
end

function CAdd:updateOutput(input)
  input = broadcast.contiguous(self, '_input', input)
  local x, b = broadcast.views(self, self.bias, input)
  self.output:resizeAs(input)
  self.output:view(x:size()):add(x, b)
  return self.output
end

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
