-- The index of the maximum along dim (dim + 1 when the input has more than nInputDim
-- dimensions, i.e. is a batch), that dimension removed; as a LongTensor unless asLong is false.
-- Not differentiable: gradInput is zeros.
local ArgMax, parent = torch.class('nn.ArgMax', 'nn.Module')

function ArgMax:__init(dim, nInputDim, asLong)
  parent.__init(self)
  self.dim = dim or 1
  self.nInputDim = nInputDim or 9999
  if asLong == nil then asLong = true end
  self.asLong = asLong
  if asLong then self.output = torch.LongTensor() end
end

function ArgMax:updateOutput(input)
  self._value = self._value or input.new()
  self._indices = self._indices or torch.LongTensor()
  local dim = input:dim() > self.nInputDim and self.dim + 1 or self.dim
  if dim > input:dim() then
    error(('nn.ArgMax: dimension %d out of range of %dD input'):format(dim, input:dim()), 2)
  end
  torch.max(self._value, self._indices, input, dim)
  local indices = input:dim() > 1 and self._indices:select(dim, 1) or self._indices
  self.output:resize(indices:size()):copy(indices)
  return self.output
end

function ArgMax:updateGradInput(input, gradOutput)
  self.gradInput:resizeAs(input):zero()
  return self.gradInput
end

-- Indices stay on the CPU as longs (a GPU max needs its own index type), as does a long output.
function ArgMax:type(name, tensorCache)
  local indices = self._indices
  self._indices = nil
  parent.type(self, name, tensorCache)
  if name == 'torch.CudaTensor' then
    self._indices = nil
  else
    self._indices = indices and indices:long()
  end
  if self.asLong then self.output = torch.LongTensor() end
  return self
end
