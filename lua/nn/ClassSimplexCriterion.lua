-- Multi-class loss against a fixed embedding of the classes: class c is the c-th vertex of a
-- regular simplex (unit vectors, centred at the origin, padded with zeros to nClasses dims), and
-- the loss is MSECriterion between the input and the targets' vertices.
local check = require 'torch.core.check'
local targets = require 'nn.util.targets'
local loss = require 'nn.util.loss'
local ClassSimplexCriterion, parent = torch.class('nn.ClassSimplexCriterion', 'nn.MSECriterion')

-- The n + 1 vertices (rows) of a regular simplex in R^n with unit norms: coordinate k of
-- vertex k completes its norm to 1, and the vertices after it share one coordinate k chosen
-- so that their dot product with vertex k is -1/n.
local function regularSimplex(n)
  local a = torch.zeros(n + 1, n)
  for k = 1, n do
    local rest = k > 1 and a[k]:narrow(1, 1, k - 1):norm() or 0
    local akk = math.sqrt(1 - rest * rest)
    a[k][k] = akk
    a:narrow(1, k + 1, n + 1 - k):select(2, k):fill((akk * akk - 1 - 1 / n) / akk)
  end
  return a
end

function ClassSimplexCriterion:__init(nClasses)
  parent.__init(self)
  if type(nClasses) ~= 'number' or nClasses < 2 or nClasses ~= math.floor(nClasses) then
    check.error('nn.ClassSimplexCriterion: nClasses must be an integer > 1, got ' .. tostring(nClasses))
  end
  self.nClasses = nClasses
  -- embedding in more dims than the nClasses - 1 needed helps training
  self.simplex = torch.zeros(nClasses, nClasses)
  self.simplex:narrow(2, 1, nClasses - 1):copy(regularSimplex(nClasses - 1))
  self._target = torch.Tensor(nClasses)
end

-- self._target holds the vertex of each class in target (a number or a 1-D tensor).
local function vertices(self, input, target)
  if torch.isTensor(input) then loss.checkHost(self, input) end
  local t = targets.tensor(self, target)
  if t:dim() ~= 1 then
    check.error(('%s: target must be a number or a 1-D tensor, got %s'):format(
      torch.type(self), check.sizestr(t)))
  end
  targets.checkRange(self, t, t:nElement(), self.nClasses)
  if type(target) == 'number' then
    self._target:resize(self.nClasses):copy(self.simplex[target])
  else
    -- the rows of the targets' classes (checked integers in range): an index_select
    self._target:index(self.simplex, 1, t:long())
  end
  if input:nElement() ~= self._target:nElement() then
    check.error(('%s: input of size %s does not match %d targets of %d classes'):format(
      torch.type(self), check.sizestr(input), t:nElement(), self.nClasses))
  end
  return self._target
end

function ClassSimplexCriterion:updateOutput(input, target)
  return parent.updateOutput(self, input, vertices(self, input, target))
end

function ClassSimplexCriterion:updateGradInput(input, target)
  return parent.updateGradInput(self, input, vertices(self, input, target))
end

-- The input's dot products with every class vertex (one row per sample).
function ClassSimplexCriterion:getPredictions(input)
  if input:dim() == 1 then input = input:view(1, -1) end
  return torch.mm(input, self.simplex:t())
end

function ClassSimplexCriterion:getTopPrediction(input)
  local prod = self:getPredictions(input)
  local _, best = prod:max(prod:dim())
  return best:view(-1)
end
