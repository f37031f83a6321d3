-- nn.StochasticGradient(module, criterion): torch7's plain SGD trainer. train(dataset) runs
-- maxIteration passes (0: without end) over dataset[i] = {input, target} (i = 1..dataset:size()),
-- in random order unless shuffleIndices is false, stepping every parameter by
-- -learningRate / (1 + iteration * learningRateDecay) times its gradient after each example
-- (accUpdateGradParameters). hookExample(self, example) runs after each example,
-- hookIteration(self, iteration, error) after each pass.
local StochasticGradient = torch.class('nn.StochasticGradient')

function StochasticGradient:__init(module, criterion)
  self.learningRate = 0.01
  self.learningRateDecay = 0
  self.maxIteration = 25
  self.shuffleIndices = true
  self.verbose = true
  self.module = module
  self.criterion = criterion
end

function StochasticGradient:train(dataset)
  local module, criterion = self.module, self.criterion
  local size = dataset:size()
  local iteration, rate = 1, self.learningRate
  local order = self.shuffleIndices and torch.randperm(size) or torch.range(1, size)
  print('# StochasticGradient: training')
  while true do
    local total = 0
    for t = 1, size do
      local example = dataset[order[t]]
      local input, target = example[1], example[2]
      total = total + criterion:forward(module:forward(input), target)
      module:updateGradInput(input, criterion:updateGradInput(module.output, target))
      module:accUpdateGradParameters(input, criterion.gradInput, rate)
      if self.hookExample then self.hookExample(self, example) end
    end
    local err = total / size
    if self.hookIteration then self.hookIteration(self, iteration, err) end
    if self.verbose then print('# current error = ' .. err) end
    iteration = iteration + 1
    rate = self.learningRate / (1 + iteration * self.learningRateDecay)
    if self.maxIteration > 0 and iteration > self.maxIteration then
      print('# StochasticGradient: you have reached the maximum number of iterations')
      print('# training error = ' .. err)
      break
    end
  end
end

return StochasticGradient
