-- Indices (a number or a tensor of them, 1-based) to one-hot rows of outputSize: the output
-- has the input's sizes plus a last dim of outputSize.
local check = require 'torch.core.check'
local OneHot, parent = torch.class('nn.OneHot', 'nn.Module')

function OneHot:__init(outputSize)
  parent.__init(self)
  self.outputSize = check.int('nn.OneHot', outputSize, 'outputSize', 1)
end

function OneHot:updateOutput(input)
  local sizes
  if type(input) == 'number' then
    self._single = self._single or torch.LongTensor(1)
    self._single[1] = input
    input, sizes = self._single, {}
  else
    check.tensorOf('nn.OneHot', input, 'input')
    sizes = input:size():totable()
  end
  if input:nElement() > 0 and not (input:min() >= 1 and input:max() <= self.outputSize) then   -- NaN fails
    check.error(('nn.OneHot: indices must be in [1, %d], got values in [%s, %s]'):format(
      self.outputSize, input:min(), input:max()))
  end
  sizes[#sizes + 1] = self.outputSize
  self.output:resize(torch.LongStorage(sizes)):zero()
  sizes[#sizes] = 1
  self._input = self._input or torch.LongTensor()
  self._input:resize(input:size()):copy(input)
  self.output:scatter(self.output:dim(), self._input:view(torch.LongStorage(sizes)), 1)
  return self.output
end

function OneHot:updateGradInput(input, gradOutput)
  if type(input) == 'number' then return 0 end
  self.gradInput:resize(input:size()):zero()
  return self.gradInput
end

function OneHot:clearState()
  self._single, self._input = nil, nil
  return parent.clearState(self)
end

function OneHot:type(type, cache)
  self:clearState()
  return parent.type(self, type, cache)
end
