-- Samples one category per row of a batch x categories matrix of probabilities, output one-hot
-- (training); evaluation outputs the probabilities. gradInput = -reward * sample / (p + 1e-8).
local ReinforceCategorical, parent = torch.class('nn.ReinforceCategorical', 'nn.Reinforce')

function ReinforceCategorical:updateOutput(input)
  self.output:resizeAs(input)
  if self:_sampling() then
    if input:dim() ~= 2 then
      error(('nn.ReinforceCategorical: expecting batch x categories probabilities, got %dD'):format(input:dim()), 2)
    end
    self._index = self._index or torch.LongTensor()
    local probs = input:type() == 'torch.CudaTensor' and input or input:double()
    torch.multinomial(self._index, probs, 1)
    self.output:zero():scatter(2, self._index:typeAs(self._index), 1)
  else
    self.output:copy(input)
  end
  return self.output
end

function ReinforceCategorical:updateGradInput(input, gradOutput)
  self._input = self._input or input.new()
  self._input:resizeAs(input):copy(input):add(1e-8)
  self.gradInput:resizeAs(input):copy(self.output):cdiv(self._input)
  self.gradInput:cmul(self:rewardAs(input)):mul(-1)
  return self.gradInput
end

function ReinforceCategorical:type(name, tensorCache)
  self._index = nil
  return parent.type(self, name, tensorCache)
end
