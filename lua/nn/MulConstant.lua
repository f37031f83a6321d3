-- x * constant_scalar. In place, the input is scaled and restored by the backward pass.
local check = require 'torch.core.check'
local MulConstant, parent = torch.class('nn.MulConstant', 'nn.Module')

function MulConstant:__init(constantScalar, ip)
  parent.__init(self)
  self.constant_scalar = check.number('nn.MulConstant', constantScalar, 'constant_scalar')
  self.inplace = check.optBoolean('nn.MulConstant', ip, 'inplace') or false
end

function MulConstant:updateOutput(input)
  check.tensorOf('nn.MulConstant', input, 'input')
  if self.inplace then
    input:mul(self.constant_scalar)
    self.output:set(input)
  else
    self.output:resizeAs(input):copy(input):mul(self.constant_scalar)
  end
  return self.output
end

function MulConstant:updateGradInput(input, gradOutput)
  if not self.gradInput then return end
  check.sameElements('nn.MulConstant', input, gradOutput)
  if self.inplace then
    gradOutput:mul(self.constant_scalar)
    self.gradInput:set(gradOutput)
    input:div(self.constant_scalar)
  else
    self.gradInput:resizeAs(gradOutput):copy(gradOutput):mul(self.constant_scalar)
  end
  return self.gradInput
end
