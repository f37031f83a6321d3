-- Wraps one module (self.modules[1]) and forwards every call to it; subclasses change some.
local check = require 'torch.core.check'
local Decorator, parent = torch.class('nn.Decorator', 'nn.Container')

function Decorator:__init(module)
  parent.__init(self)
  self.modules[1] = check.module(torch.type(self), module, 'module')
end

function Decorator:updateOutput(input)
  self.output = self.modules[1]:updateOutput(input)
  return self.output
end

function Decorator:updateGradInput(input, gradOutput)
  self.gradInput = self.modules[1]:updateGradInput(input, gradOutput)
  return self.gradInput
end

for _, method in ipairs({ 'accGradParameters', 'accUpdateGradParameters', 'sharedAccUpdateGradParameters' }) do
  Decorator[method] = function(self, input, gradOutput, arg)
    self.modules[1][method](self.modules[1], input, gradOutput, arg)
  end
end

function Decorator:__tostring__()
  local inner = self.modules[1]
  return torch.type(self) .. ' @ ' .. (inner.__tostring__ and inner:__tostring__() or torch.type(inner))
end

-- Gives another class Decorator's forwarding methods (for classes deriving from elsewhere).
function Decorator.decorate(class)
  for _, method in ipairs({ 'updateOutput', 'updateGradInput', 'accGradParameters',
      'accUpdateGradParameters', 'sharedAccUpdateGradParameters', '__tostring__' }) do
    class[method] = Decorator[method]
  end
end
