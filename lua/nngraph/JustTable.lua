-- Wraps its input in a one-element table: x -> {x} (what nngraph.nest({node}) makes).
local JustTable, parent = torch.class('nngraph.JustTable', 'nn.Module')

function JustTable:__init()
  parent.__init(self)
  self.output = {}
end

function JustTable:updateOutput(input)
  self.output[1] = input
  return self.output
end

function JustTable:updateGradInput(input, gradOutput)
  self.gradInput = gradOutput[1]
  return self.gradInput
end
