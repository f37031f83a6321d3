-- x + constant_scalar. In place, the input is shifted and restored by the backward pass.
local check = require 'torch.check'
local AddConstant, parent = torch.class('nn.AddConstant', 'nn.Module')

function AddConstant:__init(constantScalar, ip)
  parent.__init(self)
  if type(constantScalar) ~= 'number' then error('nn.AddConstant: input is not scalar!') end
  self.constant_scalar = constantScalar
  self.inplace = ip or false
end

function AddConstant:updateOutput(input)
  check.tensorOf('nn.AddConstant', input, 'input')
  if self.inplace then
    input:add(self.constant_scalar)
    self.output:set(input)
  else
    self.output:resizeAs(input):copy(input):add(self.constant_scalar)
  end
  return self.output
end

function AddConstant:updateGradInput(input, gradOutput)
  check.sameElements('nn.AddConstant', input, gradOutput)
  if self.inplace then
    self.gradInput:set(gradOutput)
    input:add(-self.constant_scalar)
  else
    self.gradInput:resizeAs(gradOutput):copy(gradOutput)
  end
  return self.gradInput
end
