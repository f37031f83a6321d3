-- Adds Gaussian noise N(mean, std^2) to its input while training; in evaluation mode it adds
-- only the mean. The gradient passes through unchanged (defined only while training).
local check = require 'torch.core.check'
local WhiteNoise, parent = torch.class('nn.WhiteNoise', 'nn.Module')

function WhiteNoise:__init(mean, std)
  parent.__init(self)
  self.mean = check.optNumber('nn.WhiteNoise', mean, 'mean') or 0
  self.std = check.optNumber('nn.WhiteNoise', std, 'std') or 0.1
  self.noise = torch.Tensor()
end

function WhiteNoise:updateOutput(input)
  self.output:resizeAs(input):copy(input)
  if self.train ~= false then
    self.noise = self.noise:typeAs(input)
    self.output:add(self.noise:resizeAs(input):normal(self.mean, self.std))
  elseif self.mean ~= 0 then
    self.output:add(self.mean)
  end
  return self.output
end

function WhiteNoise:updateGradInput(input, gradOutput)
  if self.train == false then error('nn.WhiteNoise: backprop only defined while training') end
  self.gradInput:resizeAs(gradOutput):copy(gradOutput)
  return self.gradInput
end

function WhiteNoise:clearState()
  self.noise:set()
  return parent.clearState(self)
end

function WhiteNoise:__tostring__()
  return string.format('%s mean: %f, std: %f', torch.type(self), self.mean, self.std)
end
