-- Multi-class hinge loss: for each sample x of target class c,
-- sum over d ~= c of w[c] max(0, margin - x[c] + x[d])^p / #x  (p = 1 or 2),
-- averaged over the samples when sizeAverage.
local check = require 'torch.core.check'
local loss = require 'nn.util.loss'
local targets = require 'nn.util.targets'
local MultiMarginCriterion, parent = torch.class('nn.MultiMarginCriterion', 'nn.Criterion')

function MultiMarginCriterion:__init(p, weights, margin)
  if p ~= nil and p ~= 1 and p ~= 2 then
    check.error('nn.MultiMarginCriterion: only p = 1 and p = 2 are supported, got ' .. tostring(p))
  end
  parent.__init(self)
  self.p = p or 1
  self.margin = check.optNumber('nn.MultiMarginCriterion', margin, 'margin') or 1
  self.sizeAverage = true
  self.weights = loss.checkWeights('nn.MultiMarginCriterion', weights)
end

-- Validates; returns the target tensor, the sample count and the class count.
local function frames(self, input, target)
  local name = torch.type(self)
  local nframe, dim = targets.frames(self, input)
  local t = targets.tensor(self, target)
  if (input:dim() == 2 and t:dim() ~= 1) or t:nElement() ~= nframe then
    check.error(('%s: inconsistent target size %s for input of size %s'):format(
      name, check.sizestr(t), check.sizestr(input)))
  end
  targets.checkWeights(self, dim)
  targets.checkRange(self, t, nframe, dim)
  return t, nframe, dim
end

function MultiMarginCriterion:updateOutput(input, target)
  local t, nframe, dim = frames(self, input, target)
  local p, rs, cs = targets.rows(input)
  local margin, square = self.margin, self.p == 2
  local sum = 0
  for i = 0, nframe - 1 do
    local c = targets.at(t, i)
    local row = i * rs
    local xc = tonumber(p[row + (c - 1) * cs])
    local rowSum = 0
    for d = 0, dim - 1 do
      local z = margin - xc + tonumber(p[row + d * cs])
      if d ~= c - 1 and z > 0 then rowSum = rowSum + (square and z * z or z) end
    end
    sum = sum + rowSum * targets.classWeight(self.weights, c)
  end
  sum = sum / dim
  if self.sizeAverage then sum = sum / nframe end
  self.output = sum
  return sum
end

function MultiMarginCriterion:updateGradInput(input, target)
  local t, nframe, dim = frames(self, input, target)
  local p, rs, cs = targets.rows(input)
  self.gradInput:resizeAs(input)
  local gp, grs, gcs = targets.rows(self.gradInput)
  local margin, square = self.margin, self.p == 2
  local g = self.sizeAverage and 1 / (nframe * dim) or 1 / dim
  for i = 0, nframe - 1 do
    local c = targets.at(t, i)
    local row, grow = i * rs, i * grs
    local xc = tonumber(p[row + (c - 1) * cs])
    local scale = g * targets.classWeight(self.weights, c)
    local gc = 0
    for d = 0, dim - 1 do
      local z = margin - xc + tonumber(p[row + d * cs])
      local h = 0
      if d ~= c - 1 and z > 0 then h = square and 2 * scale * z or scale end
      gp[grow + d * gcs] = h
      gc = gc - h
    end
    gp[grow + (c - 1) * gcs] = gc
  end
  return self.gradInput
end
