-- x for x > 0, a * x otherwise, with a learned slope a per input plane (nOutputPlane; dim 1
-- of a vector, dim 2 of a batch) or one shared slope (nOutputPlane 0 or nil). Slopes start at 0.25.
local check = require 'torch.core.check'
local backend = require 'torch.backend'
local pointwise = require 'nn.util.pointwise'
local PReLU, parent = torch.class('nn.PReLU', 'nn.Module')

-- The passes are the op table's prelu_forward, prelu_backward, prelu_slope_grad (nn_pointwise).

function PReLU:__init(nOutputPlane)
  parent.__init(self)
  self.nOutputPlane = check.optInt('nn.PReLU', nOutputPlane, 'nOutputPlane', 0) or 0
  local nSlopes = math.max(self.nOutputPlane, 1)
  self.weight = torch.Tensor(nSlopes):fill(0.25)
  self.gradWeight = torch.Tensor(nSlopes)
end

-- input (contiguous) as batch x planes x rest, and the slopes expanded to that shape.
function PReLU:views(input)
  pointwise.checkInput(self, input, true)
  input = input:contiguous()
  local n = input:nElement()
  if self.nOutputPlane == 0 then
    local x = input:view(1, 1, n)
    return x, self.weight:view(1, 1, 1):expandAs(x)
  end
  local nd = input:dim()
  local planeDim = nd > 1 and 2 or 1
  if nd == 0 or input:size(planeDim) ~= self.nOutputPlane then
    check.error(('nn.PReLU: wrong number of input planes: expected %d, got input %s'):format(
      self.nOutputPlane, check.sizestr(input)))
  end
  local batch = nd > 1 and input:size(1) or 1
  local x = input:view(batch, self.nOutputPlane, n / (batch * self.nOutputPlane))
  return x, self.weight:view(1, self.nOutputPlane, 1):expandAs(x)
end

function PReLU:updateOutput(input)
  local x, w = self:views(input)
  self.output:resizeAs(input)
  backend.of(x).prelu_forward(self, self.output:view(x:size()), x, w)
  return self.output
end

function PReLU:updateGradInput(input, gradOutput)
  local x, w = self:views(input)
  check.sameElements('nn.PReLU', input, gradOutput)
  self.gradInput:resizeAs(input)
  backend.of(x).prelu_backward(self, self.gradInput:view(x:size()), x, gradOutput:contiguous():view(x:size()), w)
  return self.gradInput
end

function PReLU:accGradParameters(input, gradOutput, scale)
  local x = self:views(input)
  check.sameElements('nn.PReLU', input, gradOutput)
  self._buf = self._buf or input.new()
  self._buf:resize(x:size())
  backend.of(x).prelu_slope_grad(self, self._buf, x, gradOutput:contiguous():view(x:size()))
  local perPlane = torch.sum(torch.sum(self._buf, 3), 1)
  self.gradWeight:add(scale or 1, perPlane:view(self.gradWeight:size()))
  return self.gradWeight
end

function PReLU:clearState()
  return parent.clearState(self, '_buf', '_part', '_mask', '_above', '_below')
end
