-- The L1 norm of the input as a loss (no target): sum |x|, gradient sign(x).
local check = require 'torch.core.check'
local L1Cost, parent = torch.class('nn.L1Cost', 'nn.Criterion')

function L1Cost:__init()
  parent.__init(self)
end

function L1Cost:updateOutput(input)
  check.tensorOf(torch.type(self), input, 'input')
  self.output = input:nElement() > 0 and input:norm(1) or 0
  return self.output
end

function L1Cost:updateGradInput(input)
  check.tensorOf(torch.type(self), input, 'input')
  self.gradInput:resizeAs(input):copy(input):sign()
  return self.gradInput
end
