-- Input {tensor, byte mask of the same element count}: output is the 1-D tensor of the
-- elements where the mask is 1 (torch.maskedSelect). The gradient is scattered back to those
-- positions; the mask gets a zero gradient.
local MaskedSelect, parent = torch.class('nn.MaskedSelect', 'nn.Module')

function MaskedSelect:__init()
  parent.__init(self)
  self._maskIndices = torch.LongTensor()
  self._maskIndexBuffer = torch.LongTensor()
  self._gradBuffer = torch.Tensor()
  self._gradMask = torch.ByteTensor()
end

function MaskedSelect:updateOutput(input)
  local x, mask = input[1], input[2]
  self.output:maskedSelect(x, mask)
  return self.output
end

function MaskedSelect:updateGradInput(input, gradOutput)
  local x, mask = input[1], input[2]
  -- the linear positions (1-based) of the selected elements
  self._maskIndexBuffer:range(1, mask:nElement()):resize(mask:size())
  self._maskIndices:maskedSelect(self._maskIndexBuffer, mask)
  self._gradBuffer = self._gradBuffer:typeAs(x)
  self._gradBuffer:resize(x:nElement()):zero()
  self._gradBuffer:indexCopy(1, self._maskIndices, gradOutput)
  self._gradBuffer:resize(x:size())
  self.gradInput = { self._gradBuffer, self._gradMask:resize(mask:size()):zero() }
  return self.gradInput
end

function MaskedSelect:clearState()
  return parent.clearState(self, '_maskIndexBuffer', '_maskIndices', '_gradBuffer', '_gradMask')
end
