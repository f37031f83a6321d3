-- nn.ExpandAs: {a, b} -> {a, b expanded to a's size}; b's gradient sums over the expanded
-- dimensions.
local ExpandAs, parent = torch.class('nn.ExpandAs', 'nn.Module')

function ExpandAs:__init()
  parent.__init(self)
  self.output = {}
  self.gradInput = {}
  self.sum1 = torch.Tensor()
  self.sum2 = torch.Tensor()
end

function ExpandAs:updateOutput(input)
  self.output[1] = input[1]
  self.output[2] = input[2]:expandAs(input[1])
  return self.output
end

function ExpandAs:updateGradInput(input, gradOutput)
  local b, grad = input[2], gradOutput[2]
  local spare = self.sum1 -- two buffers used in turn
  for d = 1, b:dim() do
    if b:size(d) ~= grad:size(d) then
      spare:sum(grad, d)
      grad, spare = spare, (spare == self.sum1 and self.sum2 or self.sum1)
    end
  end
  self.gradInput[1] = gradOutput[1]
  self.gradInput[2] = grad
  return self.gradInput
end
