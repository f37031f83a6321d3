-- {A, B} -> A B for matrices, or per sample for batches (b x n x m, b x m x p); transA and
-- transB use the transposes.
local check = require 'torch.core.check'
local MM, parent = torch.class('nn.MM', 'nn.Module')

function MM:__init(transA, transB)
  parent.__init(self)
  self.transA = transA or false
  self.transB = transB or false
  self.gradInput = { torch.Tensor(), torch.Tensor() }
end

local function product(res, a, b)
  if a:dim() == 2 then torch.mm(res, a, b) else torch.bmm(res, a, b) end
  return res
end

-- The last two dims swapped (the matrix of each sample transposed).
local function t(x) return x:transpose(x:dim() - 1, x:dim()) end

function MM:operands(input)
  if type(input) ~= 'table' or #input ~= 2 or not torch.isTensor(input[1])
      or not torch.isTensor(input[2]) then
    check.error('nn.MM: input must be a table of two tensors')
  end
  local a, b = input[1], input[2]
  local nd = a:dim()
  if (nd ~= 2 and nd ~= 3) or b:dim() ~= nd then
    check.error(('nn.MM: expected two matrices or two batches of matrices, got %s and %s'):format(
      check.sizestr(a), check.sizestr(b)))
  end
  a = self.transA and t(a) or a
  b = self.transB and t(b) or b
  if a:size(nd) ~= b:size(nd - 1) or (nd == 3 and a:size(1) ~= b:size(1)) then
    check.error(('nn.MM: sizes do not match for a product: %s and %s%s'):format(
      check.sizestr(input[1]), check.sizestr(input[2]),
      (self.transA or self.transB) and ' (with transposes)' or ''))
  end
  return a, b
end

function MM:updateOutput(input)
  local a, b = self:operands(input)
  product(self.output, a, b)
  return self.output
end

-- With C = A' B' (A', B' the operands after the transposes): dA' = dC B'^T, dB' = A'^T dC.
function MM:updateGradInput(input, gradOutput)
  local a, b = self:operands(input)
  if not gradOutput:isSameSizeAs(self.output) then
    check.error(('nn.MM: gradOutput size %s does not match output size %s'):format(
      check.sizestr(gradOutput), check.sizestr(self.output)))
  end
  local ga, gb = self.gradInput[1], self.gradInput[2]
  ga:typeAs(input[1]); gb:typeAs(input[2])
  if self.transA then product(ga, b, t(gradOutput)) else product(ga, gradOutput, t(b)) end
  if self.transB then product(gb, t(gradOutput), a) else product(gb, t(a), gradOutput) end
  return self.gradInput
end

function MM:clearState()
  self.gradInput[1]:set()
  self.gradInput[2]:set()
  self.output:set()
  return self
end
