-- nn.SAdd(addend[, negate]): y = x + addend, or -(x + addend) when negate (GRU's 1 - z).
local SAdd, parent = torch.class('nn.SAdd', 'nn.Module')

function SAdd:__init(addend, negate)
  parent.__init(self)
  self.addend = addend
  self.negate = negate or false
end

function SAdd:updateOutput(input)
  self.output:resizeAs(input):copy(input):add(self.addend)
  if self.negate then self.output:mul(-1) end
  return self.output
end

function SAdd:updateGradInput(input, gradOutput)
  self.gradInput:resizeAs(gradOutput):copy(gradOutput)
  if self.negate then self.gradInput:mul(-1) end
  return self.gradInput
end
