-- a * sigmoid(b), where a and b are the two halves of the input along dim (default: the last).
local check = require 'torch.core.check'
local backend = require 'torch.backend'
local pointwise = require 'nn.util.pointwise'
local GatedLinearUnit, parent = torch.class('nn.GatedLinearUnit', 'nn.Module')

-- d/db of a * sigmoid(b) times gradOutput, from s = sigmoid(b): gradOutput * a * s * (1 - s),
-- the op table's glu_gate_grad (nn_pointwise).

function GatedLinearUnit:__init(dim)
  parent.__init(self)
  self.dim = check.optInt('nn.GatedLinearUnit', dim, 'dim', 1, check.MAXDIM)
end

function GatedLinearUnit:halves(input)
  pointwise.checkInput(self, input, true)
  local dim = self.dim or input:dim()
  if dim < 1 or dim > input:dim() or input:size(dim) % 2 ~= 0 then
    check.error(('nn.GatedLinearUnit: halving dimension %d of %s input must exist and be even')
      :format(dim, check.sizestr(input)))
  end
  local h = input:size(dim) / 2
  return dim, h
end

function GatedLinearUnit:updateOutput(input)
  local dim, h = self:halves(input)
  local a, b = input:narrow(dim, 1, h), input:narrow(dim, h + 1, h)
  self.output:resizeAs(a):sigmoid(b):cmul(a)
  return self.output
end

function GatedLinearUnit:updateGradInput(input, gradOutput)
  local dim, h = self:halves(input)
  check.sameElements('nn.GatedLinearUnit', self.output, gradOutput)
  local a, b = input:narrow(dim, 1, h), input:narrow(dim, h + 1, h)
  self.gradInput:resizeAs(input)
  local ga, gb = self.gradInput:narrow(dim, 1, h), self.gradInput:narrow(dim, h + 1, h)
  ga:sigmoid(b)
  backend.of(input).glu_gate_grad(self, gb, gradOutput, a, ga)
  ga:cmul(gradOutput)
  return self.gradInput
end
