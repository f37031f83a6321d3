-- nn.RecurrentAttention(rnn, action, nStep, hiddenSize): a recurrent attention model (Mnih 2014).
-- At each of nStep steps, action maps the previous rnn output (zeros of hiddenSize at step 1)
-- to an action (e.g. a glimpse location), and rnn maps {input, action} to its next output.
-- Outputs the table of rnn outputs ({output, action} pairs when forwardActions is true).
local RecurrentAttention, parent = torch.class('nn.RecurrentAttention', 'nn.AbstractSequencer')

function RecurrentAttention:__init(rnnModule, action, nStep, hiddenSize)
  parent.__init(self)
  assert(torch.isTypeOf(action, 'nn.Module'), "RecurrentAttention: expecting nn.Module action at arg 2")
  assert(torch.type(nStep) == 'number', "RecurrentAttention: expecting number nStep at arg 3")
  assert(torch.type(hiddenSize) == 'table' and torch.type(hiddenSize[1]) == 'number',
    "RecurrentAttention: expecting a size table hiddenSize at arg 4 (table hidden layers are not supported)")
  local function recurrent(m) return torch.isTypeOf(m, 'nn.AbstractRecurrent') and m or nn.Recursor(m) end
  self.rnn = recurrent(rnnModule)
  self.action = recurrent(action)
  self.hiddenSize = hiddenSize
  self.nStep = nStep
  self.modules = { self.rnn, self.action }
  self.output = {}
  self.actions = {}
  self.forwardActions = false
  self.gradHidden = {}
end

function RecurrentAttention:updateOutput(input)
  self.rnn:forget()
  self.action:forget()
  for step = 1, self.nStep do
    if step == 1 then
      self._initInput = self._initInput or input.new()
      self._initInput:resize(input:size(1), unpack(self.hiddenSize)):zero()
      self.actions[1] = self.action:updateOutput(self._initInput)
    else
      self.actions[step] = self.action:updateOutput(self.output[step - 1])
    end
    local output = self.rnn:updateOutput({ input, self.actions[step] })
    self.output[step] = self.forwardActions and { output, self.actions[step] } or output
  end
  return self.output
end

function RecurrentAttention:_checkGradOutput(gradOutput)
  assert(self.rnn.step - 1 == self.nStep, "RecurrentAttention: inconsistent rnn steps")
  assert(torch.type(gradOutput) == 'table', "RecurrentAttention: expecting gradOutput table")
  assert(#gradOutput == self.nStep, "RecurrentAttention: gradOutput should have nStep elements")
end

-- The gradient reaching step's action: given with forwardActions, zeros otherwise (actions are
-- usually trained by REINFORCE instead).
function RecurrentAttention:_gradAction(gradOutput, step)
  if self.forwardActions then return gradOutput[step][2] end
  self._zeroGradAction = self._zeroGradAction or self.action.output.new()
  if not self._zeroGradAction:isSameSizeAs(self.action.output) then
    self._zeroGradAction:resizeAs(self.action.output):zero()
  end
  return self._zeroGradAction
end

function RecurrentAttention:_actionInput(step)
  return step == 1 and self._initInput or self.output[step - 1]
end

function RecurrentAttention:updateGradInput(input, gradOutput)
  self:_checkGradOutput(gradOutput)
  for step = self.nStep, 1, -1 do
    local gradStepOutput = self.forwardActions and gradOutput[step][1] or gradOutput[step]
    if step == self.nStep then
      self.gradHidden[step] = nn.rnn.recursiveCopy(self.gradHidden[step], gradStepOutput)
    else
      nn.rnn.recursiveAdd(self.gradHidden[step], gradStepOutput)
    end
    -- the action of this step was computed from the previous output
    local gradPrevOutput = self.action:updateGradInput(self:_actionInput(step), self:_gradAction(gradOutput, step))
    if step > 1 then self.gradHidden[step - 1] = nn.rnn.recursiveCopy(self.gradHidden[step - 1], gradPrevOutput) end
    local gradInput = self.rnn:updateGradInput({ input, self.actions[step] }, self.gradHidden[step])[1]
    if step == self.nStep then
      self.gradInput:resizeAs(gradInput):copy(gradInput)
    else
      self.gradInput:add(gradInput)
    end
  end
  return self.gradInput
end

function RecurrentAttention:_accumulate(method, input, gradOutput, arg)
  self:_checkGradOutput(gradOutput)
  for step = self.nStep, 1, -1 do
    self.action[method](self.action, self:_actionInput(step), self:_gradAction(gradOutput, step), arg)
    self.rnn[method](self.rnn, { input, self.actions[step] }, self.gradHidden[step], arg)
  end
end

function RecurrentAttention:accGradParameters(input, gradOutput, scale)
  self:_accumulate('accGradParameters', input, gradOutput, scale)
end

function RecurrentAttention:accUpdateGradParameters(input, gradOutput, lr)
  self:_accumulate('accUpdateGradParameters', input, gradOutput, lr)
end

function RecurrentAttention:type(type, tensorCache)
  self._initInput, self._zeroGradAction = nil, nil
  return parent.type(self, type, tensorCache)
end

function RecurrentAttention:__tostring__()
  local function part(m) return (tostring(m):gsub('\n', '\n    |    ')) end
  return table.concat({ torch.type(self) .. ' {',
    '  action : ' .. part(self.action),
    '  rnn     : ' .. part(self.rnn),
    '}' }, '\n')
end
