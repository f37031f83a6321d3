-- The single element of a one-element table input (what node:split(1) makes).
local JustElement, parent = torch.class('nngraph.JustElement', 'nn.Module')

function JustElement:__init()
  parent.__init(self)
  self.gradInput = {}
end

function JustElement:updateOutput(input)
  if type(input) ~= 'table' or #input ~= 1 then
    error('nngraph.JustElement: expecting a table of one element, got ' ..
          (type(input) == 'table' and #input .. ' elements' or torch.type(input)), 2)
  end
  self.output = input[1]
  return self.output
end

function JustElement:updateGradInput(input, gradOutput)
  self.gradInput[1] = gradOutput
  return self.gradInput
end
