-- Clamps the input to [minval, maxval]; the gradient passes through unchanged (straight-through).
local check = require 'torch.core.check'
local Clip, parent = torch.class('nn.Clip', 'nn.Module')

function Clip:__init(minval, maxval)
  parent.__init(self)
  self.minval = check.number('nn.Clip', minval, 'minval')
  self.maxval = check.number('nn.Clip', maxval, 'maxval')
end

function Clip:updateOutput(input)
  self.output:resizeAs(input):copy(input):clamp(self.minval, self.maxval)
  return self.output
end

function Clip:updateGradInput(input, gradOutput)
  self.gradInput:set(gradOutput)
  return self.gradInput
end
