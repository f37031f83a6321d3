-- Removes the size-1 dims (or only dim). With numInputDims, a batch dim of size 1 stays.
local check = require 'torch.core.check'
local Squeeze, parent = torch.class('nn.Squeeze', 'nn.Module')

function Squeeze:__init(dim, numInputDims)
  parent.__init(self)
  self.dim = check.optInt('nn.Squeeze', dim, 'dim', -check.MAXDIM, check.MAXDIM)
  self:setNumInputDims(numInputDims)
end

function Squeeze:setNumInputDims(numInputDims)
  self.numInputDims = check.optInt('nn.Squeeze', numInputDims, 'numInputDims', 0, check.MAXDIM)
  return self
end

function Squeeze:updateOutput(input)
  check.tensorOf('nn.Squeeze', input, 'input')
  local dim, batched = self.dim, self.numInputDims and input:dim() == self.numInputDims + 1
  if dim and batched then dim = dim + 1 end
  if dim and (dim < 1 or dim > input:dim()) then
    check.error(('nn.Squeeze: dimension %d out of range of %s input'):format(dim, check.sizestr(input)))
  end
  self.output:set(dim and input:squeeze(dim) or input:squeeze())
  if not dim and batched and input:size(1) == 1 then  -- keep a batch of one
    local sizes = self.output:size():totable()
    table.insert(sizes, 1, 1)
    self.output:set(self.output:view(torch.LongStorage(sizes)))
  end
  return self.output
end

function Squeeze:updateGradInput(input, gradOutput)
  check.sameElements('nn.Squeeze', input, gradOutput)
  self.gradInput:set(gradOutput:contiguous():view(input:size()))
  return self.gradInput
end
