-- Outputs a constant value (a number or a tensor) whatever the input; with nInputDim, an
-- input with more dims is a batch and the value is repeated for each sample.
local check = require 'torch.check'
local Constant, parent = torch.class('nn.Constant', 'nn.Module')

function Constant:__init(value, nInputDim)
  self.value = type(value) == 'number' and torch.Tensor { value } or value
  assert(torch.isTensor(self.value), 'Expecting number or tensor at arg 1')
  self.nInputDim = nInputDim
  parent.__init(self)
end

function Constant:updateOutput(input)
  check.tensorOf('nn.Constant', input, 'input')
  if self.nInputDim and input:dim() > self.nInputDim then
    local sizes = self.value:size():totable()
    table.insert(sizes, 1, input:size(1))
    self.output:resize(torch.LongStorage(sizes))
    sizes[1] = 1
    self.output:copy(self.value:view(torch.LongStorage(sizes)):expandAs(self.output))
  else
    self.output:resize(self.value:size()):copy(self.value)
  end
  return self.output
end

function Constant:updateGradInput(input, gradOutput)
  self.gradInput:resizeAs(input):zero()
  return self.gradInput
end
