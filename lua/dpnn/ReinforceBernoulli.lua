-- Samples 0/1 with P(1) = input (training); evaluation outputs the probabilities.
-- gradInput = -reward * (sample - p) / (p * (1 - p)).
local ReinforceBernoulli, parent = torch.class('nn.ReinforceBernoulli', 'nn.Reinforce')

function ReinforceBernoulli:updateOutput(input)
  self.output:resizeAs(input)
  if self:_sampling() then
    self._uniform = self._uniform or input.new()
    self._uniform:resizeAs(input):uniform(0, 1)
    self.output:lt(self._uniform, input)
  else
    self.output:copy(input)
  end
  return self.output
end

function ReinforceBernoulli:updateGradInput(input, gradOutput)
  self._div = self._div or input.new()
  self._div:resizeAs(input):fill(1):add(-1, input):cmul(input)
  self.gradInput:resizeAs(input):copy(self.output):add(-1, input):cdiv(self._div)
  self.gradInput:cmul(self:rewardAs(input)):mul(-1)
  return self.gradInput
end
