-- y_j = ||x - w_j||, the distance from x to each of outputSize templates (the columns of
-- weight, inputSize x outputSize), for a vector or each row of a batch.
local check = require 'torch.core.check'
local Euclidean, parent = torch.class('nn.Euclidean', 'nn.Module')

function Euclidean:__init(inputSize, outputSize)
  parent.__init(self)
  check.int(torch.type(self), inputSize, 'inputSize', 0)
  check.int(torch.type(self), outputSize, 'outputSize', 0)
  self.weight = torch.Tensor(inputSize, outputSize)
  self.gradWeight = torch.Tensor(inputSize, outputSize)
  self:reset()
end

function Euclidean:reset(stdv)
  stdv = stdv and stdv * math.sqrt(3) or 1 / math.sqrt(self.weight:size(1))
  self.weight:uniform(-stdv, stdv)
end

-- input as batch x inputSize.
function Euclidean:rows(input)
  local name = torch.type(self)
  if not torch.isTensor(input) or (input:dim() ~= 1 and input:dim() ~= 2)
      or input:size(input:dim()) ~= self.weight:size(1) then
    check.error(('%s: expected a vector of %d or a batch of them, got %s'):format(name,
      self.weight:size(1), torch.isTensor(input) and check.sizestr(input) or torch.type(input)))
  end
  return input:dim() == 1 and input:view(1, -1) or input
end

-- _diff = x - w for every sample and template: batch x inputSize x outputSize.
function Euclidean:differences(x)
  local b, n, k = x:size(1), self.weight:size(1), self.weight:size(2)
  self._diff = self._diff or x.new()
  return self._diff:resize(b, n, k):add(x:view(b, n, 1):expand(b, n, k),
    -1, self.weight:view(1, n, k):expand(b, n, k))
end

function Euclidean:updateOutput(input)
  local x = self:rows(input)
  local diff = self:differences(x)
  self._sq = self._sq or x.new()
  self._sq:resizeAs(diff):cmul(diff, diff)
  torch.sum(self.output, self._sq, 2):sqrt()
  self.output = input:dim() == 1 and self.output:view(-1) or self.output:view(x:size(1), -1)
  return self.output
end

-- d y_j / d x = (x - w_j) / y_j (0 where y_j = 0); _coef holds gradOutput_j / y_j.
function Euclidean:coefficients(x, gradOutput)
  local b, k = x:size(1), self.weight:size(2)
  if gradOutput:nElement() ~= b * k then
    check.error(('%s: gradOutput size %s does not match output size %s'):format(torch.type(self),
      check.sizestr(gradOutput), check.sizestr(self.output)))
  end
  self._coef = self._coef or x.new()
  self._coef:resize(b, k):cdiv(gradOutput:contiguous():view(b, k), self.output:view(b, k))
  self._coef:maskedFill(self.output:view(b, k):eq(0), 0)
  return self._coef:view(b, 1, k)
end

function Euclidean:updateGradInput(input, gradOutput)
  local x = self:rows(input)
  local coef = self:coefficients(x, gradOutput)
  local diff = self:differences(x)
  self._sq:resizeAs(diff):cmul(diff, coef:expandAs(diff))
  self.gradInput:resizeAs(input)
  torch.sum(self.gradInput:view(x:size(1), x:size(2), 1), self._sq, 3)
  return self.gradInput
end

function Euclidean:accGradParameters(input, gradOutput, scale)
  local x = self:rows(input)
  local coef = self:coefficients(x, gradOutput)
  local diff = self:differences(x)
  self._sq:resizeAs(diff):cmul(diff, coef:expandAs(diff))
  self.gradWeight:add(-(scale or 1), torch.sum(self._sq, 1):view(self.gradWeight:size()))
end

function Euclidean:clearState()
  return parent.clearState(self, '_diff', '_sq', '_coef')
end
