-- An L1 regularizer on the activations: forward passes the input through (self.loss holds
-- l1weight * ||x||_1, divided by nElement with sizeAverage); backward adds the loss's gradient
-- to gradOutput (or gives only the loss's gradient when provideOutput is false).
local check = require 'torch.core.check'
local L1Penalty, parent = torch.class('nn.L1Penalty', 'nn.Module')

function L1Penalty:__init(l1weight, sizeAverage, provideOutput)
  parent.__init(self)
  self.l1weight = check.number('nn.L1Penalty', l1weight, 'l1weight')
  self.sizeAverage = sizeAverage or false
  self.provideOutput = provideOutput == nil or provideOutput
end

function L1Penalty:weightFor(input)
  check.tensorOf('nn.L1Penalty', input, 'input')
  return self.sizeAverage and self.l1weight / input:nElement() or self.l1weight
end

function L1Penalty:updateOutput(input)
  self.loss = self:weightFor(input) * input:norm(1)
  self.output = input
  return self.output
end

function L1Penalty:updateGradInput(input, gradOutput)
  local m = self:weightFor(input)
  self.gradInput:resizeAs(input):copy(input):sign():mul(m)
  if self.provideOutput then
    check.sameElements('nn.L1Penalty', input, gradOutput)
    self.gradInput:add(gradOutput)
  end
  return self.gradInput
end
