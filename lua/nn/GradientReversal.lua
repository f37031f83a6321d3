-- The identity forward; backward negates the gradient and scales it by lambda.
local check = require 'torch.core.check'
local GradientReversal, parent = torch.class('nn.GradientReversal', 'nn.Module')

function GradientReversal:__init(lambda)
  parent.__init(self)
  self:setLambda(lambda or 1)
end

function GradientReversal:setLambda(lambda)
  self.lambda = check.number('nn.GradientReversal', lambda, 'lambda')
end

function GradientReversal:updateOutput(input)
  self.output:set(check.tensorOf('nn.GradientReversal', input, 'input'))
  return self.output
end

function GradientReversal:updateGradInput(input, gradOutput)
  check.sameElements('nn.GradientReversal', input, gradOutput)
  self.gradInput:resizeAs(gradOutput):copy(gradOutput):mul(-self.lambda)
  return self.gradInput
end
