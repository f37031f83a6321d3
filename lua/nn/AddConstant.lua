-- x + constant_scalar, where the constant is a number or a vector added to a vector input or
-- to each row of a matrix. In place, the input is shifted and restored by the backward pass.
local check = require 'torch.core.check'
local AddConstant, parent = torch.class('nn.AddConstant', 'nn.Module')

function AddConstant:__init(constantScalar, ip)
  parent.__init(self)
  self.constant_scalar = constantScalar
  self.inplace = check.optBoolean('nn.AddConstant', ip, 'inplace') or false
end

-- The constant, as a number or as a tensor expanded to input's layout.
function AddConstant:addend(input)
  check.tensorOf('nn.AddConstant', input, 'input')
  local c, nd = self.constant_scalar, input:dim()
  if type(c) == 'number' then return c end
  if not torch.isTensor(c) or nd < 1 or nd > 2 or input:size(nd) ~= c:nElement() then
    check.error(("nn.AddConstant: input is not scalar or doesn't match with the dimension of constant! (input %s, constant %s)")
      :format(check.sizestr(input), torch.isTensor(c) and check.sizestr(c) or torch.type(c)))
  end
  c = c:contiguous():view(1, c:nElement())
  return nd == 2 and c:expand(input:size(1), c:size(2)) or c:view(c:size(2))
end

-- t += sign * c for a number or tensor c.
local function shift(t, c, sign)
  if type(c) == 'number' then t:add(sign * c) else t:add(sign, c) end
  return t
end

function AddConstant:updateOutput(input)
  local c = self:addend(input)
  if self.inplace then
    self.output:set(shift(input, c, 1))
  else
    shift(self.output:resizeAs(input):copy(input), c, 1)
  end
  return self.output
end

function AddConstant:updateGradInput(input, gradOutput)
  check.sameElements('nn.AddConstant', input, gradOutput)
  if self.inplace then
    self.gradInput:set(gradOutput)
    shift(input, self:addend(input), -1)
  else
    self.gradInput:resizeAs(gradOutput):copy(gradOutput)
  end
  return self.gradInput
end
