-- Triplet loss on a pair of distances {X, Y} (X between similar samples, Y between dissimilar
-- ones): -log(exp(-X) / (exp(-X) + exp(-Y))) = X + log(exp(-X) + exp(-Y)), summed over the
-- pairs and divided by their count (the size of dim 1) when sizeAverage.
local check = require 'torch.core.check'
local DistanceRatioCriterion, parent = torch.class('nn.DistanceRatioCriterion', 'nn.Criterion')

function DistanceRatioCriterion:__init(sizeAverage)
  parent.__init(self)
  self.sizeAverage = sizeAverage ~= false
end

local function validate(self, input)
  local name = torch.type(self)
  if torch.type(input) ~= 'table' or #input ~= 2 or not torch.isTensor(input[1])
     or not torch.isTensor(input[2]) then
    check.error(name .. ': input must be a table of two tensors {X, Y}')
  end
  local x, y = input[1], input[2]
  if x:nElement() ~= y:nElement() or x:dim() == 0 or x:size(1) ~= y:size(1) then
    check.error(('%s: distances of sizes %s and %s do not match'):format(
      name, check.sizestr(x), check.sizestr(y)))
  end
  return x, y
end

-- exp(-X), exp(-Y) and their sum, in buffers.
local function exponentials(self, x, y)
  self._expMinusX = (self._expMinusX or x.new()):resizeAs(x):copy(x):mul(-1):exp()
  self._expMinusY = (self._expMinusY or y.new()):resizeAs(y):copy(y):mul(-1):exp()
  self._sumExpMinusXY = (self._sumExpMinusXY or x.new()):resizeAs(x):copy(self._expMinusX)
    :add(self._expMinusY)
end

function DistanceRatioCriterion:updateOutput(input)
  local x, y = validate(self, input)
  exponentials(self, x, y)
  self.loss = (self.loss or x.new()):resizeAs(x):copy(self._sumExpMinusXY):log():add(x)
  self.output = self.loss:sum() / (self.sizeAverage and x:size(1) or 1)
  return self.output
end

-- dL/dX = 1 - exp(-X) / (exp(-X) + exp(-Y)), dL/dY = -exp(-Y) / (exp(-X) + exp(-Y)).
function DistanceRatioCriterion:updateGradInput(input)
  local x, y = validate(self, input)
  exponentials(self, x, y)
  local scale = self.sizeAverage and 1 / x:size(1) or 1
  self.dX = (self.dX or x.new()):resizeAs(x):cdiv(self._expMinusX, self._sumExpMinusXY):mul(-1)
    :add(1):mul(scale)
  self.dY = (self.dY or y.new()):resizeAs(y):cdiv(self._expMinusY, self._sumExpMinusXY):mul(-scale)
  self.gradInput = { self.dX, self.dY }
  return self.gradInput
end

function DistanceRatioCriterion:type(name, cache)
  if name then
    self._expMinusX, self._expMinusY, self._sumExpMinusXY = nil, nil, nil
    self.loss, self.dX, self.dY = nil, nil, nil
  end
  return parent.type(self, name, cache)
end
