-- Outputs a constant value (a number or a tensor) whatever the input; with nInputDim, an
-- input with more dims is a batch and the value is repeated for each sample.
local check = require 'torch.core.check'
local Constant, parent = torch.class('nn.Constant', 'nn.Module')

function Constant:__init(value, nInputDim)
  if type(value) == 'number' then value = torch.Tensor { value } end
  self.value = check.tensorOf('nn.Constant', value, 'value (a number or a tensor)')
  self.nInputDim = check.optInt('nn.Constant', nInputDim, 'nInputDim', 0, check.MAXDIM)
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
