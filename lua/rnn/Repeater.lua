-- nn.Repeater(module, rho): feeds the same input to module rho times, outputs a table of the rho
-- step outputs; backward sums the step gradients.
local Repeater, parent = torch.class('nn.Repeater', 'nn.AbstractSequencer')

function Repeater:__init(module, rho)
  parent.__init(self)
  assert(torch.type(rho) == 'number', "Repeater: expecting number value for arg 2 (rho), got " .. torch.type(rho))
  self.rho = rho
  self.module = torch.isTypeOf(module, 'nn.AbstractRecurrent') and module or nn.Recursor(module)
  self.module:maxBPTTstep(rho)
  self.modules[1] = self.module
  self.output = {}
end

function Repeater:updateOutput(input)
  self.module = self.module or self.rnn -- files of older versions
  self.module:forget()
  for step = 1, self.rho do
    self.output[step] = nn.rnn.recursiveCopy(self.output[step], self.module:updateOutput(input))
  end
  return self.output
end

function Repeater:_checkGradOutput(gradOutput)
  assert(self.module.step - 1 == self.rho, "Repeater: inconsistent rnn steps")
  assert(torch.type(gradOutput) == 'table', "Repeater: expecting gradOutput table")
  assert(#gradOutput == self.rho, "Repeater: gradOutput should have rho elements")
end

function Repeater:updateGradInput(input, gradOutput)
  self:_checkGradOutput(gradOutput)
  for step = self.rho, 1, -1 do
    local gradInput = self.module:updateGradInput(input, gradOutput[step])
    if step == self.rho then
      self.gradInput = nn.rnn.recursiveCopy(self.gradInput, gradInput)
    else
      nn.rnn.recursiveAdd(self.gradInput, gradInput)
    end
  end
  return self.gradInput
end

function Repeater:accGradParameters(input, gradOutput, scale)
  self:_checkGradOutput(gradOutput)
  for step = self.rho, 1, -1 do self.module:accGradParameters(input, gradOutput[step], scale) end
end

function Repeater:accUpdateGradParameters(input, gradOutput, lr)
  self:_checkGradOutput(gradOutput)
  for step = self.rho, 1, -1 do self.module:accUpdateGradParameters(input, gradOutput[step], lr) end
end

function Repeater:maxBPTTstep(rho)
  self.rho = rho
  self.module:maxBPTTstep(rho)
end

function Repeater:__tostring__()
  local inner = tostring(self.modules[1]):gsub('\n', '\n  ')
  return table.concat({ torch.type(self) .. ' {',
    '  [  input,    input,  ...,  input  ]',
    '       V         V             V     ',
    '  ' .. inner,
    '       V         V             V     ',
    '  [output(1),output(2),...,output(' .. self.rho .. ')]',
    '}' }, '\n')
end
