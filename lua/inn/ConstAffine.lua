-- inn.ConstAffine(nOutputPlane, inplace): y = a * x + b per feature (the second dimension of a
-- 2-D or 4-D input), a and b fixed (no parameters): a batch normalization frozen by
-- inn.utils.BNtoFixed.
require 'inn.env'
local unpack = unpack or table.unpack
local ConstAffine, parent = torch.class('inn.ConstAffine', 'nn.Module')

function ConstAffine:__init(nOutputPlane, inplace)
  parent.__init(self)
  if type(nOutputPlane) ~= 'number' or nOutputPlane < 1 then
    error('inn.ConstAffine: the number of features must be a positive number, got ' .. tostring(nOutputPlane), 2)
  end
  self.a = torch.Tensor(nOutputPlane)
  self.b = torch.Tensor(nOutputPlane)
  self.inplace = inplace or false
  self:reset()
end

function ConstAffine:reset()
  self.a:fill(1)
  self.b:zero()
end

-- a and b as views broadcast over the input
local function coefficients(self, input)
  local n = self.a:nElement()
  local shape
  if input:dim() == 2 then shape = { 1, n }
  elseif input:dim() == 4 then shape = { 1, n, 1, 1 }
  else error(('inn.ConstAffine: a 2-D or 4-D input expected, got %d-D'):format(input:dim()), 3) end
  if input:size(2) ~= n then
    error(('inn.ConstAffine: the input has %d features (size %s), the module %d'):format(
      input:size(2), table.concat(input:size():totable(), 'x'), n), 3)
  end
  return self.a:view(unpack(shape)):expandAs(input), self.b:view(unpack(shape)):expandAs(input)
end

function ConstAffine:updateOutput(input)
  local a, b = coefficients(self, input)
  if self.inplace then self.output:set(input) else self.output:resizeAs(input):copy(input) end
  self.output:cmul(a):add(b)
  return self.output
end

function ConstAffine:updateGradInput(input, gradOutput)
  local a = coefficients(self, input)
  if self.inplace then self.gradInput:set(gradOutput) else self.gradInput:resizeAs(gradOutput):copy(gradOutput) end
  self.gradInput:cmul(a)
  return self.gradInput
end

function ConstAffine:__tostring__()
  return ('%s(%d)'):format(torch.type(self), self.a:nElement())
end
