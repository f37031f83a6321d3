-- y_j = ||c_j * (x - w_j)||: Euclidean distances to the templates w_j (columns of weight)
-- with a learned diagonal scaling c_j per template (columns of diagCov, starting at 1).
local check = require 'torch.core.check'
local WeightedEuclidean, parent = torch.class('nn.WeightedEuclidean', 'nn.Euclidean')

function WeightedEuclidean:__init(inputSize, outputSize)
  check.int('nn.WeightedEuclidean', inputSize, 'inputSize', 0)
  check.int('nn.WeightedEuclidean', outputSize, 'outputSize', 0)
  self.diagCov = torch.Tensor(inputSize, outputSize)
  self.gradDiagCov = torch.Tensor(inputSize, outputSize)
  parent.__init(self, inputSize, outputSize)
end

function WeightedEuclidean:reset(stdv)
  parent.reset(self, stdv)
  self.diagCov:fill(1)
end

function WeightedEuclidean:parameters()
  return { self.weight, self.diagCov }, { self.gradWeight, self.gradDiagCov }
end

local function expanded(t, b) return t:view(1, t:size(1), t:size(2)):expand(b, t:size(1), t:size(2)) end

function WeightedEuclidean:updateOutput(input)
  local x = self:rows(input)
  local diff = self:differences(x)
  self._sq = self._sq or x.new()
  self._sq:resizeAs(diff):cmul(diff, expanded(self.diagCov, x:size(1))):pow(2)
  torch.sum(self.output, self._sq, 2):sqrt()
  self.output = input:dim() == 1 and self.output:view(-1) or self.output:view(x:size(1), -1)
  return self.output
end

-- dy/dx = c^2 (x - w) / y, dy/dw = -dy/dx, dy/dc = c (x - w)^2 / y.
function WeightedEuclidean:updateGradInput(input, gradOutput)
  local x = self:rows(input)
  local coef = self:coefficients(x, gradOutput)
  local diff = self:differences(x)
  local c = expanded(self.diagCov, x:size(1))
  self._sq:resizeAs(diff):cmul(diff, c):cmul(c):cmul(coef:expandAs(diff))
  self.gradInput:resizeAs(input)
  torch.sum(self.gradInput:view(x:size(1), x:size(2), 1), self._sq, 3)
  return self.gradInput
end

function WeightedEuclidean:accGradParameters(input, gradOutput, scale)
  scale = scale or 1
  local x = self:rows(input)
  local coef = self:coefficients(x, gradOutput):expandAs(self:differences(x))
  local diff = self._diff
  local c = expanded(self.diagCov, x:size(1))
  self._sq:resizeAs(diff):cmul(diff, c):cmul(c):cmul(coef)
  self.gradWeight:add(-scale, torch.sum(self._sq, 1):view(self.gradWeight:size()))
  self._sq:cmul(diff, diff):cmul(c):cmul(coef)
  self.gradDiagCov:add(scale, torch.sum(self._sq, 1):view(self.gradDiagCov:size()))
end
