-- Embedding loss on the L1 distance d of two vectors: d for a pair labelled y = 1 (alike),
-- max(0, margin - d) for y = -1.
local check = require 'torch.core.check'
local loss = require 'nn.util.loss'
local L1HingeEmbeddingCriterion, parent =
  torch.class('nn.L1HingeEmbeddingCriterion', 'nn.Criterion')

function L1HingeEmbeddingCriterion:__init(margin)
  parent.__init(self)
  self.margin = check.optNumber('nn.L1HingeEmbeddingCriterion', margin, 'margin') or 1
  self.gradInput = { torch.Tensor(), torch.Tensor() }
end

local function validate(self, input, y)
  local name = torch.type(self)
  loss.twoTensors(self, input)
  if input[1]:nElement() ~= input[2]:nElement() then
    check.error(('%s: inputs of different sizes, %s and %s'):format(
      name, check.sizestr(input[1]), check.sizestr(input[2])))
  end
  if y ~= 1 and y ~= -1 then
    check.error(('%s: label must be 1 or -1, got %s'):format(name, tostring(y)))
  end
end

function L1HingeEmbeddingCriterion:updateOutput(input, y)
  validate(self, input, y)
  self.output = input[1]:dist(input[2], 1)
  if y == -1 then self.output = math.max(0, self.margin - self.output) end
  return self.output
end

-- The L1 subgradient sign(x1 - x2) is taken as 0 where x1 == x2 (torch7 draws a random sign).
function L1HingeEmbeddingCriterion:updateGradInput(input, y)
  validate(self, input, y)
  local g1, g2 = self.gradInput[1], self.gradInput[2]
  g1:resizeAs(input[1]):copy(input[1]):add(-1, input[2])
  local dist = g1:norm(1)
  g1:sign()
  if y == -1 then
    if dist > self.margin then g1:zero() else g1:mul(-1) end
  end
  g2:resizeAs(input[2]):copy(g1):mul(-1)
  return self.gradInput
end
