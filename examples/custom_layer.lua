-- A layer written as torch7 users wrote them: nn.MyLayer, a Swish activation with a learned
-- slope, y = x * sigmoid(w * x), w one parameter (so the layer shows parameters, gradients and
-- getParameters at work). Tensor operations only, so it runs on any tensor type.
require 'nn'

local MyLayer, parent = torch.class('nn.MyLayer', 'nn.Module')

function MyLayer:__init(slope)
  parent.__init(self)
  self.weight = torch.Tensor(1):fill(slope or 1)
  self.gradWeight = torch.Tensor(1):zero()
end

-- s = sigmoid(w * x), kept for the backward pass
function MyLayer:updateOutput(input)
  self._sigmoid = self._sigmoid or input.new()
  self._sigmoid:resizeAs(input):copy(input):mul(self.weight[1]):sigmoid()
  self.output:resizeAs(input):cmul(input, self._sigmoid)
  return self.output
end

-- dy/dx = s + w * x * s * (1 - s); dy/dw = x * x * s * (1 - s)
function MyLayer:updateGradInput(input, gradOutput)
  local s = self._sigmoid
  self._slope = self._slope or input.new()
  self._slope:resizeAs(s):fill(1):add(-1, s):cmul(s):cmul(input)  -- x * s * (1 - s)
  self.gradInput:resizeAs(input):copy(self._slope):mul(self.weight[1]):add(s):cmul(gradOutput)
  return self.gradInput
end

function MyLayer:accGradParameters(input, gradOutput, scale)
  self._prod = self._prod or input.new()
  self._prod:resizeAs(input):cmul(self._slope, input):cmul(gradOutput)
  self.gradWeight[1] = self.gradWeight[1] + (scale or 1) * self._prod:sum()
end

function MyLayer:__tostring__()
  return string.format('%s(slope %.4g)', torch.type(self), self.weight[1])
end
