-- Ranking hinge loss of two scores x1, x2 and a label y (1: x1 should rank higher, -1: x2):
-- max(0, -y (x1 - x2) + margin). One pair when y is a number (the scores' first elements),
-- else one pair per element of the tensors x1, x2, y, averaged when sizeAverage.
local check = require 'torch.core.check'
local loss = require 'nn.util.loss'
local MarginRankingCriterion, parent = torch.class('nn.MarginRankingCriterion', 'nn.Criterion')

function MarginRankingCriterion:__init(margin)
  parent.__init(self)
  self.margin = check.optNumber('nn.MarginRankingCriterion', margin, 'margin') or 1
  self.gradInput = { torch.Tensor(1), torch.Tensor(1) }
  self.sizeAverage = true
end

local function validate(self, input, y)
  local name = torch.type(self)
  loss.twoTensors(self, input)
  local n1, n2 = input[1]:nElement(), input[2]:nElement()
  if type(y) == 'number' then
    if n1 < 1 or n2 < 1 then check.error(name .. ': empty input') end
    return
  end
  check.tensorOf(name, y, 'target')
  if n1 ~= n2 or n1 ~= y:nElement() then
    check.error(('%s: inconsistent sizes, inputs %s and %s, target %s'):format(name,
      check.sizestr(input[1]), check.sizestr(input[2]), check.sizestr(y)))
  end
end

-- The per-pair values -y (x1 - x2) + margin, in self._dist.
local function distances(self, input, y)
  self._dist = self._dist or input[1].new()
  return self._dist:resizeAs(input[1]):copy(input[2]):add(-1, input[1]):cmul(y):add(self.margin)
end

function MarginRankingCriterion:updateOutput(input, y)
  validate(self, input, y)
  if type(y) == 'number' then
    self.output = math.max(0, -y * (input[1]:storage()[input[1]:storageOffset()]
      - input[2]:storage()[input[2]:storageOffset()]) + self.margin)
    return self.output
  end
  local dist = distances(self, input, y)
  self.output = dist:cmax(0):sum()
  if self.sizeAverage then self.output = self.output / y:nElement() end
  return self.output
end

function MarginRankingCriterion:updateGradInput(input, y)
  validate(self, input, y)
  local g1, g2 = self.gradInput[1], self.gradInput[2]
  if type(y) == 'number' then
    local x1 = input[1]:storage()[input[1]:storageOffset()]
    local x2 = input[2]:storage()[input[2]:storageOffset()]
    local active = -y * (x1 - x2) + self.margin >= 0
    g1:resize(1):fill(active and -y or 0)
    g2:resize(1):fill(active and y or 0)
    return self.gradInput
  end
  -- as torch7's, a pair exactly at the margin counts as active
  self._mask = self._mask or input[1].new()
  self._mask:resizeAs(input[1]):ge(distances(self, input, y), 0)
  local scale = self.sizeAverage and 1 / y:nElement() or 1
  g1:resizeAs(input[1]):copy(self._mask):cmul(y):mul(-scale)
  g2:resizeAs(input[2]):copy(self._mask):cmul(y):mul(scale)
  return self.gradInput
end
