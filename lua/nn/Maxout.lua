-- Maxout (Goodfellow et al. 2013): a Linear to outputSize * maxoutNumber units, viewed as
-- maxoutNumber groups of outputSize, then the max over the groups (an optional preprocess
-- module runs before the max).
local check = require 'torch.core.check'
local Maxout, parent = torch.class('nn.Maxout', 'nn.Sequential')

function Maxout:__init(inputSize, outputSize, maxoutNumber, preprocess)
  parent.__init(self)
  check.int('nn.Maxout', inputSize, 'inputSize', 1)
  check.int('nn.Maxout', outputSize, 'outputSize', 1)
  check.int('nn.Maxout', maxoutNumber, 'maxoutNumber', 1)
  self:add(nn.Linear(inputSize, outputSize * maxoutNumber))
  self:add(nn.View(maxoutNumber, outputSize):setNumInputDims(1))
  if preprocess then self:add(preprocess) end
  self:add(nn.Max(1, 2))
end
