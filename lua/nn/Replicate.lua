-- nf copies of the input along a new dim (a stride-0 view, no copy). With ndim, the new dim
-- counts after a leading batch dim.
local check = require 'torch.core.check'
local Replicate, parent = torch.class('nn.Replicate', 'nn.Module')

function Replicate:__init(nf, dim, ndim)
  parent.__init(self)
  self.nfeatures = check.int('nn.Replicate', nf, 'nFeature', 0)
  self.dim = check.optInt('nn.Replicate', dim, 'dim', 1, check.MAXDIM) or 1
  self.ndim = check.optInt('nn.Replicate', ndim, 'nDim', 0, check.MAXDIM)
end

function Replicate:position(input)
  check.tensorOf('nn.Replicate', input, 'input')
  local rdim = self.dim + ((self.ndim and input:dim() > self.ndim) and 1 or 0)
  if rdim > input:dim() + 1 then
    check.error(('nn.Replicate: not enough input dimensions to replicate along dimension %d (input %s)')
      :format(self.dim, check.sizestr(input)))
  end
  return rdim
end

function Replicate:updateOutput(input)
  local rdim = self:position(input)
  local sizes, strides = input:size():totable(), input:stride():totable()
  table.insert(sizes, rdim, self.nfeatures)
  table.insert(strides, rdim, 0)
  self.output:set(input:storage(), input:storageOffset(), torch.LongStorage(sizes),
    torch.LongStorage(strides))
  return self.output
end

function Replicate:updateGradInput(input, gradOutput)
  local rdim = self:position(input)
  local sizes = input:size():totable()
  table.insert(sizes, rdim, 1)
  self.gradInput:resizeAs(input)
  torch.sum(self.gradInput:view(torch.LongStorage(sizes)), gradOutput, rdim)
  return self.gradInput
end
