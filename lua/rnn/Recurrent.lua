-- nn.Recurrent(start, input, feedback[, transfer, rho, merge]): the simple RNN
--   h(1) = transfer(start(input(x(1)))),  h(t) = transfer(merge{input(x(t)), feedback(h(t-1))}).
-- start may be a size (an nn.Add bias is made).
local Recurrent, parent = torch.class('nn.Recurrent', 'nn.AbstractRecurrent')

function Recurrent:__init(start, input, feedback, transfer, rho, merge)
  parent.__init(self, rho)
  local startType = torch.type(start)
  if startType == 'torch.LongStorage' or startType == 'number' then
    start = nn.Add(start)
  elseif startType == 'table' then
    start = nn.Add(torch.LongStorage(start))
  elseif not torch.isTypeOf(start, 'nn.Module') then
    error("Recurrent : expecting arg 1 of type nn.Module, torch.LongStorage, number or table")
  end
  self.startModule = start
  self.inputModule = input
  self.feedbackModule = feedback
  self.transferModule = transfer or nn.Sigmoid()
  self.mergeModule = merge or nn.CAddTable()
  self.modules = { self.startModule, self.inputModule, self.feedbackModule, self.transferModule, self.mergeModule }
  self:buildInitialModule()
  self:buildRecurrentModule()
  self.sharedClones[2] = self.recurrentModule
end

-- Step 1 has no previous output: input -> start -> transfer.
function Recurrent:buildInitialModule()
  self.initialModule = nn.Sequential()
    :add(self.inputModule:sharedClone())
    :add(self.startModule)
    :add(self.transferModule:sharedClone())
end

function Recurrent:buildRecurrentModule()
  self.recurrentModule = nn.Sequential()
    :add(nn.ParallelTable():add(self.inputModule):add(self.feedbackModule))
    :add(self.mergeModule)
    :add(self.transferModule)
end

function Recurrent:updateOutput(input)
  if self.step == 1 then return self:_recordOutput(self.initialModule:updateOutput(input)) end
  return self:_recordOutput(self:_forwardModule():updateOutput({ input, self.outputs[self.step - 1] }))
end

function Recurrent:_updateGradInput(input, gradOutput)
  assert(self.step > 1, "expecting at least one updateOutput")
  local step = self.updateGradInputStep - 1
  if self.gradPrevOutput then
    -- the gradient of this step's output also comes from the next step
    self._gradOutputs[step] = nn.rnn.recursiveCopy(self._gradOutputs[step], self.gradPrevOutput)
    nn.rnn.recursiveAdd(self._gradOutputs[step], gradOutput)
    gradOutput = self._gradOutputs[step]
  end
  if step > 1 then
    local gradInput
    gradInput, self.gradPrevOutput = unpack(self:getStepModule(step):updateGradInput({ input, self.outputs[step - 1] }, gradOutput))
    return gradInput
  elseif step == 1 then
    return self.initialModule:updateGradInput(input, gradOutput)
  end
  error("Recurrent: non-positive time-step")
end

function Recurrent:_accGradParameters(input, gradOutput, scale)
  local step = self.accGradParametersStep - 1
  if step ~= self.step - 1 then gradOutput = self._gradOutputs[step] end
  if step > 1 then
    self:getStepModule(step):accGradParameters({ input, self.outputs[step - 1] }, gradOutput, scale)
  elseif step == 1 then
    self.initialModule:accGradParameters(input, gradOutput, scale)
  else
    error("Recurrent: non-positive time-step")
  end
end

function Recurrent:includingSharedClones(f)
  local initialModule = self.initialModule
  self.initialModule = nil
  local results = { parent.includingSharedClones(self, f, { initialModule }) }
  self.initialModule = initialModule
  return unpack(results)
end

function Recurrent:reinforce(reward)
  if torch.type(reward) ~= 'table' then
    return self:includingSharedClones(function() return parent.reinforce(self, reward) end)
  end
  for step, stepReward in ipairs(reward) do
    local module = step == 1 and self.initialModule or self:getStepModule(step)
    module:reinforce(stepReward)
  end
end

function Recurrent:maskZero()
  error("Recurrent doesn't support maskZero as it uses a different module for the first time-step. Use nn.Recurrence instead.")
end

function Recurrent:trimZero()
  error("Recurrent doesn't support trimZero as it uses a different module for the first time-step. Use nn.Recurrence instead.")
end

function Recurrent:__tostring__()
  local function indent(module, pad) return (tostring(module):gsub('\n', '\n' .. pad)) end
  return table.concat({
    torch.type(self) .. ' {',
    '  [{input(t), output(t-1)} -> (1) -> (2) -> (3) -> output(t)]',
    '  (1):  {',
    '    input(t)',
    '      |`-> (t==0): ' .. indent(self.startModule, '      |    '),
    '      |`-> (t~=0): ' .. indent(self.inputModule, '      |    '),
    '    output(t-1)',
    '      |`-> ' .. indent(self.feedbackModule, '      |    '),
    '  }',
    '  (2): ' .. indent(self.mergeModule, '  '),
    '  (3): ' .. indent(self.transferModule, '  '),
    '}' }, '\n')
end
