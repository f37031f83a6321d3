-- Embedding loss on the cosine similarity c of two vectors (or of each row of two matrices):
-- 1 - c for a pair labelled y = 1 (alike), max(0, c - margin) for y = -1; averaged over the
-- pairs when sizeAverage. y is a number (one pair) or a tensor with one label per row.
local check = require 'torch.core.check'
local loss = require 'nn.util.loss'
local cosine = require 'nn.util.cosine'
local backend = require 'torch.backend'
local CosineEmbeddingCriterion, parent = torch.class('nn.CosineEmbeddingCriterion', 'nn.Criterion')

function CosineEmbeddingCriterion:__init(margin)
  parent.__init(self)
  self.margin = check.optNumber('nn.CosineEmbeddingCriterion', margin, 'margin') or 0
  self.gradInput = { torch.Tensor(), torch.Tensor() }
  self.sizeAverage = true
end

-- The two inputs as N x D matrices, the labels as a tensor of N; validated.
local function prepare(self, input, y)
  local name = torch.type(self)
  loss.twoTensors(self, input)
  local x1, x2 = input[1], input[2]
  loss.checkHost(self, x1)
  if not x1:isSameSizeAs(x2) or (x1:dim() ~= 1 and x1:dim() ~= 2) then
    check.error(('%s: inputs must be two vectors or matrices of the same size, got %s and %s')
      :format(name, check.sizestr(x1), check.sizestr(x2)))
  end
  if x1:dim() == 1 then x1, x2 = x1:contiguous():view(1, -1), x2:contiguous():view(1, -1) end
  if type(y) == 'number' then
    self._y = self._y or torch.DoubleTensor(1)
    self._y[1] = y
    y = self._y
  end
  check.tensorOf(name, y, 'target')
  loss.checkHost(self, y)
  if y:nElement() ~= x1:size(1) then
    check.error(('%s: %d labels for %d pairs'):format(name, y:nElement(), x1:size(1)))
  end
  y = y:contiguous():view(-1)
  if y:ne(1):cmul(y:ne(-1)):any() then
    check.error(('%s: labels must be 1 or -1, got values in [%s, %s]'):format(
      name, tostring(y:min()), tostring(y:max())))
  end
  return x1, x2, y
end

-- The pairs' cosines (N x 1, in self._cos).
local function cosines(self, x1, x2)
  self._cos = self._cos or x1.new()
  return cosine.forward(self, x1, x2, self._cos)
end

-- The pairs' losses (1 - c for y = 1, max(0, c - margin) for y = -1) and their gradients'
-- factors are the op table's loops (nn_loss: cosine_embedding_forward, cosine_embedding_coef).
function CosineEmbeddingCriterion:updateOutput(input, y)
  local x1, x2, labels = prepare(self, input, y)
  local cos = cosines(self, x1, x2)
  local n = labels:size(1)
  local sum = backend.of(cos).cosine_embedding_forward(labels, cos, self.margin)
  if self.sizeAverage then sum = sum / n end
  self.output = sum
  return sum
end

function CosineEmbeddingCriterion:updateGradInput(input, y)
  local x1, x2, labels = prepare(self, input, y)
  local cos = cosines(self, x1, x2)
  local n = labels:size(1)
  local coef = (self._coef or x1.new()):resize(n, 1)
  self._coef = coef
  local scale = self.sizeAverage and 1 / n or 1
  -- as torch7's, a pair of zero loss gets no gradient
  backend.of(coef).cosine_embedding_coef(coef, labels, cos, self.margin, scale)
  local g1, g2 = self.gradInput[1], self.gradInput[2]
  cosine.backward(self, x1, x2, coef, g1, g2)
  if input[1]:dim() == 1 then
    g1:resize(input[1]:size(1))
    g2:resize(input[2]:size(1))
  end
  return self.gradInput
end
