-- Swaps the dim pairs given ({1, 4}, {1, 3}: dims 1 and 4, then 1 and 3), copied. With
-- numInputDims, the pairs count after any leading batch dims.
local check = require 'torch.core.check'
local Transpose, parent = torch.class('nn.Transpose', 'nn.Module')

function Transpose:__init(...)
  parent.__init(self)
  self.permutations = { ... }
  for i = 1, select('#', ...) do
    local p = self.permutations[i]
    if type(p) ~= 'table' then check.error(('nn.Transpose: permutation %d must be a pair {dim1, dim2}, got %s'):format(i, torch.type(p))) end
    check.int('nn.Transpose', p[1], 'permutation ' .. i .. "'s first dimension", 1, check.MAXDIM)
    check.int('nn.Transpose', p[2], 'permutation ' .. i .. "'s second dimension", 1, check.MAXDIM)
  end
  self.numInputDims = nil
end

function Transpose:setNumInputDims(numInputDims)
  self.numInputDims = check.optInt('nn.Transpose', numInputDims, 'numInputDims', 0, check.MAXDIM)
  return self
end

local function permuted(self, t, input, from, to, step)
  local offset = self.numInputDims and input:dim() - self.numInputDims or 0
  for i = from, to, step do
    local a, b = self.permutations[i][1] + offset, self.permutations[i][2] + offset
    if a < 1 or b < 1 or a > t:dim() or b > t:dim() then
      check.error(('nn.Transpose: cannot swap dims %d and %d of %s input'):format(a, b,
        check.sizestr(input)))
    end
    t = t:transpose(a, b)
  end
  return t
end

function Transpose:updateOutput(input)
  check.tensorOf('nn.Transpose', input, 'input')
  local t = permuted(self, input, input, 1, #self.permutations, 1)
  self.output:resizeAs(t):copy(t)
  return self.output
end

function Transpose:updateGradInput(input, gradOutput)
  check.tensorOf('nn.Transpose', gradOutput, 'gradOutput')
  local t = permuted(self, gradOutput, input, #self.permutations, 1, -1)
  self.gradInput:resizeAs(t):copy(t)
  return self.gradInput
end
