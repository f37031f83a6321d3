-- {M, v} -> M v for a matrix and a vector, or per sample for batches (b x n x m, b x m);
-- trans uses the transpose of M.
local check = require 'torch.core.check'
local MV, parent = torch.class('nn.MV', 'nn.Module')

function MV:__init(trans)
  parent.__init(self)
  self.trans = trans or false
  self.gradInput = { torch.Tensor(), torch.Tensor() }
end

function MV:operands(input)
  if type(input) ~= 'table' or #input ~= 2 or not torch.isTensor(input[1])
      or not torch.isTensor(input[2]) then
    check.error('nn.MV: input must be a table of two tensors')
  end
  local m, v = input[1], input[2]
  local batched = m:dim() == 3
  if not ((m:dim() == 2 and v:dim() == 1) or (batched and v:dim() == 2)) then
    check.error(('nn.MV: expected a matrix and a vector, or batches of them, got %s and %s'):format(
      check.sizestr(m), check.sizestr(v)))
  end
  if self.trans then m = m:transpose(m:dim() - 1, m:dim()) end
  if m:size(m:dim()) ~= v:size(v:dim()) or (batched and m:size(1) ~= v:size(1)) then
    check.error(('nn.MV: sizes do not match for a product: %s and %s%s'):format(
      check.sizestr(input[1]), check.sizestr(input[2]), self.trans and ' (transposed)' or ''))
  end
  return m, v, batched
end

function MV:updateOutput(input)
  local m, v, batched = self:operands(input)
  if batched then
    self.output:resize(m:size(1), m:size(2), 1)
    torch.bmm(self.output, m, v:view(v:size(1), v:size(2), 1))
    self.output:resize(m:size(1), m:size(2))
  else
    self.output:resize(m:size(1))
    torch.mv(self.output, m, v)
  end
  return self.output
end

-- With y = M' v: dM' = dy v^T (transposed back when trans), dv = M'^T dy.
function MV:updateGradInput(input, gradOutput)
  local m, v, batched = self:operands(input)
  if not gradOutput:isSameSizeAs(self.output) then
    check.error(('nn.MV: gradOutput size %s does not match output size %s'):format(
      check.sizestr(gradOutput), check.sizestr(self.output)))
  end
  local gm, gv = self.gradInput[1], self.gradInput[2]
  gm:resizeAs(input[1]); gv:resizeAs(input[2])
  if batched then
    local b, n = gradOutput:size(1), gradOutput:size(2)
    local g = gradOutput:contiguous():view(b, n, 1)
    local row = v:contiguous():view(b, 1, v:size(2))
    if self.trans then torch.bmm(gm, row:transpose(2, 3), g:transpose(2, 3))
    else torch.bmm(gm, g, row) end
    gv:resize(b, m:size(3), 1)
    torch.bmm(gv, m:transpose(2, 3), g)
    gv:resize(b, m:size(3))
  else
    gm:zero()
    if self.trans then gm:addr(v, gradOutput) else gm:addr(gradOutput, v) end
    torch.mv(gv, m:t(), gradOutput)
  end
  return self.gradInput
end

function MV:clearState()
  self.gradInput[1]:set()
  self.gradInput[2]:set()
  self.output:set()
  return self
end
