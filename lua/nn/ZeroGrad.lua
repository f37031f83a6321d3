-- Passes its input through unchanged but blocks the gradient: gradInput is all zeros
-- (of the input's shape, tables included).
local ZeroGrad = torch.class('nn.ZeroGrad', 'nn.Module')

function ZeroGrad:updateOutput(input)
  self.output:set(input)
  return self.output
end

function ZeroGrad:updateGradInput(input)
  self.gradInput = nn.utils.recursiveResizeAs(self.gradInput, input)
  self.gradInput = nn.utils.recursiveFill(self.gradInput, 0)
  return self.gradInput
end
