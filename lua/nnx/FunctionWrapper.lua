-- A module made of functions: init(self) at construction, then
-- updateOutput(self, input) and updateGradInput(self, input, gradOutput) return its results.
local FunctionWrapper = torch.class('nn.FunctionWrapper', 'nn.Module')

function FunctionWrapper:__init(init, updateOutput, updateGradInput)
  init(self)
  self.fn_updateOutput = updateOutput
  self.fn_updateGradInput = updateGradInput
end

function FunctionWrapper:updateOutput(input)
  self.output = self.fn_updateOutput(self, input)
  return self.output
end

function FunctionWrapper:updateGradInput(input, gradOutput)
  self.gradInput = self.fn_updateGradInput(self, input, gradOutput)
  return self.gradInput
end
