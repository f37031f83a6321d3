-- x * w for one learned scalar w.
local check = require 'torch.core.check'
local Mul, parent = torch.class('nn.Mul', 'nn.Module')

function Mul:__init()
  parent.__init(self)
  self.weight = torch.Tensor(1)
  self.gradWeight = torch.Tensor(1)
  self:reset()
end

function Mul:reset(stdv)
  stdv = stdv and stdv * math.sqrt(3) or 1 / math.sqrt(self.weight:size(1))
  self.weight:uniform(-stdv, stdv)
end

function Mul:updateOutput(input)
  check.tensorOf('nn.Mul', input, 'input')
  self.output:resizeAs(input):copy(input):mul(self.weight[1])
  return self.output
end

function Mul:updateGradInput(input, gradOutput)
  check.sameElements('nn.Mul', input, gradOutput)
  self.gradInput:resizeAs(input):copy(gradOutput):mul(self.weight[1])
  return self.gradInput
end

function Mul:accGradParameters(input, gradOutput, scale)
  check.sameElements('nn.Mul', input, gradOutput)
  self.gradWeight[1] = self.gradWeight[1] + (scale or 1) * input:dot(gradOutput)
end
