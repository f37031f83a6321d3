-- The p-norm distance ||x1 - x2||_p of two vectors (a 1-element output), or of each pair of
-- rows of two matrices.
local check = require 'torch.core.check'
require 'nn.utils'
local tables = require 'nn.util.tables'
local PairwiseDistance, parent = torch.class('nn.PairwiseDistance', 'nn.Module')

function PairwiseDistance:__init(p)
  parent.__init(self)
  self.gradInput = {}
  self.diff = torch.Tensor()
  self.norm = check.optNumber('nn.PairwiseDistance', p, 'p') or 2
end

function PairwiseDistance:updateOutput(input)
  local x1, x2 = tables.pair(self, input)
  if x1:dim() == 1 then
    self.output:resize(1):fill(x1:dist(x2, self.norm))
    return self.output
  end
  self.diff = self.diff or x1.new()
  self.diff:resizeAs(x1):copy(x1):add(-1, x2):abs():pow(self.norm)
  self.output:sum(self.diff, 2)
  self.output:resize(x1:size(1)):pow(1 / self.norm)
  return self.output
end

-- d ||d||_p / d d_k = d_k |d_k|^(p-2) / ||d||_p^(p-1), with 1e-6 added to the norm as torch7
-- does; for p = 1 the subgradient sign(d_k) is 0 where d_k = 0 (torch7 draws a random sign).
function PairwiseDistance:updateGradInput(input, gradOutput)
  local x1, x2 = tables.pair(self, input)
  local n = x1:dim() == 1 and 1 or x1:size(1)
  tables.gradOutputLike(self, gradOutput, torch.LongStorage { n })
  self.gradInput[1] = self.gradInput[1] or x1.new()
  self.gradInput[2] = self.gradInput[2] or x2.new()
  self.gradInput[1]:resizeAs(x1):copy(x1):add(-1, x2)
  local g1 = self.gradInput[1]:view(n, -1)   -- one row per pair
  local p = self.norm
  if p == 1 then
    g1:sign()
  else
    if p > 2 then
      self._absPow = self._absPow or x1.new()
      g1:cmul(self._absPow:resizeAs(g1):copy(g1):abs():pow(p - 2))
    end
    self.outExpand = self.outExpand or x1.new()
    self.outExpand:resize(n, 1):copy(self.output):add(1e-6):pow(1 - p)
    g1:cmul(self.outExpand:expandAs(g1))
  end
  self.grad = self.grad or x1.new()
  self.grad:resize(n, 1):copy(gradOutput)
  g1:cmul(self.grad:expandAs(g1))
  self.gradInput[2]:resizeAs(x2):copy(self.gradInput[1]):mul(-1)
  return self.gradInput
end

function PairwiseDistance:clearState()
  nn.utils.clear(self, 'diff', 'outExpand', 'grad', '_absPow')
  return parent.clearState(self)
end
