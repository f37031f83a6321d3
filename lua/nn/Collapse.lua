-- Flattens each sample to 1-D: an input with more than nInputDim dims is a batch
-- (batch x rest), otherwise the whole input becomes a vector. Non-contiguous inputs are copied.
local check = require 'torch.core.check'
local Collapse, parent = torch.class('nn.Collapse', 'nn.Module')

function Collapse:__init(nInputDim)
  parent.__init(self)
  self.nInputDim = check.int('nn.Collapse', nInputDim, 'nInputDim', 0, check.MAXDIM)
end

function Collapse:updateOutput(input)
  if not input:isContiguous() then
    self._input = self._input or input.new()
    input = self._input:resizeAs(input):copy(input)
  end
  if input:dim() > self.nInputDim then
    self.output:view(input, input:size(1), -1)
  else
    self.output:view(input, -1)
  end
  return self.output
end

function Collapse:updateGradInput(input, gradOutput)
  self.gradInput:view(gradOutput:contiguous(), input:size())
  return self.gradInput
end

function Collapse:clearState()
  return parent.clearState(self, '_input')
end
