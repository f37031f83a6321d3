-- Logistic loss for targets in {-1, 1}: sum log(1 + exp(-target * input)) / k, with k the
-- number of elements (sizeAverage, the default) or 1. Input and target: batchSize or
-- batchSize x 1.
local BinaryLogisticRegression, parent = torch.class('nn.BinaryLogisticRegression', 'nn.Criterion')

function BinaryLogisticRegression:__init(sizeAverage)
  parent.__init(self)
  if sizeAverage == nil then sizeAverage = true end
  self.sizeAverage = sizeAverage
end

local function checkColumn(name, t)
  local ok = t:dim() == 1 or (t:dim() == 2 and (t:size(1) == 1 or t:size(2) == 1))
  if not ok then
    error(('nn.BinaryLogisticRegression: %s: expecting batchSize or batchSize x 1, got %s'):format(
      name, table.concat(t:size():totable(), 'x')), 4)
  end
end

-- The divisor of the summed loss; checks the sizes first.
function BinaryLogisticRegression:_normalizer(input, target)
  checkColumn('input', input)
  checkColumn('target', target)
  if input:nElement() ~= target:nElement() then
    error(('nn.BinaryLogisticRegression: input and target should have as many elements, got %d and %d'):format(
      input:nElement(), target:nElement()), 3)
  end
  return self.sizeAverage and input:nElement() or 1
end

function BinaryLogisticRegression:updateOutput(input, target)
  self._norm = self:_normalizer(input, target)
  self._exp = self._exp or input.new()
  self._coeff = self._coeff or input.new()
  -- exp(-target * input) and 1 + exp(-target * input), kept for the gradient
  self._exp:resizeAs(input):copy(target:viewAs(input)):cmul(input):mul(-1):exp()
  self._coeff:resizeAs(input):copy(self._exp):add(1)
  self.output = self._coeff:clone():log():sum() / self._norm
  return self.output
end

-- d/dinput = -target * exp(-target * input) / (1 + exp(-target * input)) / normalizer
function BinaryLogisticRegression:updateGradInput(input, target)
  self.gradInput:resizeAs(input):copy(target:viewAs(input)):mul(-1 / self._norm)
  self.gradInput:cmul(self._exp):cdiv(self._coeff)
  return self.gradInput
end

function BinaryLogisticRegression:type(name, tensorCache)
  if name then self._exp, self._coeff = nil, nil end
  return parent.type(self, name, tensorCache)
end
