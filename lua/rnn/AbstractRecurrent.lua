-- Base of the modules that take one time-step per forward and back-propagate through time
-- (BPTT): backward is called once per step, in reverse order, after the forwards.
-- Each step runs on its own step clone of recurrentModule (parameters shared), kept in
-- sharedClones; at most rho + 1 clones are kept and recycled.
local _ = require 'moses'
local AbstractRecurrent, parent = torch.class('nn.AbstractRecurrent', 'nn.Container')

AbstractRecurrent.dpnn_stepclone = true

function AbstractRecurrent:__init(rho)
  parent.__init(self)
  self.rho = rho or 99999 -- the most time-steps back-propagated through
  self.outputs = {}
  self.gradInputs = {}
  self._gradOutputs = {}
  self.gradOutputs = {}
  self.step = 1
  self.sharedClones = {}
  self:reset()
end

-- The clone of recurrentModule that runs time-step `step`, made on first use.
function AbstractRecurrent:getStepModule(step)
  assert(step, "expecting step at arg 1")
  local module = self.sharedClones[step]
  if not module then
    module = self.recurrentModule:stepClone()
    self.sharedClones[step] = module
    self.nSharedClone = _.size(self.sharedClones)
  end
  return module
end

local function wrapRecurrentModule(self, wrapper, nInputDim)
  self.recurrentModule = wrapper(self.recurrentModule, nInputDim, true)
  self.sharedClones = { self.recurrentModule }
  self.modules[1] = self.recurrentModule
  return self
end

function AbstractRecurrent:maskZero(nInputDim) return wrapRecurrentModule(self, nn.MaskZero, nInputDim) end

function AbstractRecurrent:trimZero(nInputDim)
  if torch.typename(self) == 'nn.GRU' and self.p ~= 0 then
    assert(self.mono, "TrimZero for BGRU needs `mono` option.")
  end
  return wrapRecurrentModule(self, nn.TrimZero, nInputDim)
end

-- The module that runs the next forward: its own step clone while training (recycling old
-- clones), recurrentModule itself at evaluation (no BPTT then).
function AbstractRecurrent:_forwardModule()
  if self.train == false then return self.recurrentModule end
  self:recycle()
  return self:getStepModule(self.step)
end

-- Records the output of the step just run and moves on to the next step.
function AbstractRecurrent:_recordOutput(output)
  self.outputs[self.step] = output
  self.output = output
  self.step = self.step + 1
  self.gradPrevOutput = nil
  self.updateGradInputStep = nil
  self.accGradParametersStep = nil
  return self.output
end

-- updateGradInput/accGradParameters walk the steps backwards from the last forward.
function AbstractRecurrent:updateGradInput(input, gradOutput)
  self.updateGradInputStep = self.updateGradInputStep or self.step
  self.gradInput = self:_updateGradInput(input, gradOutput)
  self.updateGradInputStep = self.updateGradInputStep - 1
  self.gradInputs[self.updateGradInputStep] = self.gradInput
  return self.gradInput
end

function AbstractRecurrent:accGradParameters(input, gradOutput, scale)
  assert(self.updateGradInputStep < self.step, "Missing updateGradInput")
  self.accGradParametersStep = self.accGradParametersStep or self.step
  self:_accGradParameters(input, gradOutput, scale)
  self.accGradParametersStep = self.accGradParametersStep - 1
end

-- Moves the clone of step - window to the current step once more than window clones exist.
function AbstractRecurrent:recycle()
  self.nSharedClone = self.nSharedClone or _.size(self.sharedClones)
  local window = math.max(self.rho + 1, self.nSharedClone)
  local step = self.step
  if self.sharedClones[step] == nil then
    self.sharedClones[step] = self.sharedClones[step - window]
    self.sharedClones[step - window] = nil
    self._gradOutputs[step] = self._gradOutputs[step - window]
    self._gradOutputs[step - window] = nil
  end
  self.outputs[step - window - 1] = nil
  self.gradInputs[step - window - 1] = nil
  return self
end

function AbstractRecurrent:clearState()
  self:forget()
  nn.utils.clear(self, '_input', '_gradOutput', '_gradOutputs', 'gradPrevOutput', 'cell', 'cells',
    'gradCells', 'outputs', 'gradInputs', 'gradOutputs')
  for _, clone in ipairs(self.sharedClones) do clone:clearState() end
  self.recurrentModule:clearState()
  return parent.clearState(self)
end

function AbstractRecurrent:forget()
  parent.forget(self)
  if self.train ~= false then
    self.outputs = {}
    self.gradInputs = {}
    self.sharedClones = _.compact(self.sharedClones)
    self._gradOutputs = _.compact(self._gradOutputs)
    self.gradOutputs = {}
    if self.cells then
      self.cells = {}
      self.gradCells = {}
    end
  end
  self.step = 1
  self:_checkRecurrentModuleIsAClone()
  return self
end

-- recurrentModule must be one of sharedClones (older files may lack it there).
function AbstractRecurrent:_checkRecurrentModuleIsAClone()
  if self.rmInSharedClones then return end
  local count, lastIndex = 0, 1
  for index, clone in pairs(self.sharedClones) do
    if torch.pointer(clone) == torch.pointer(self.recurrentModule) then
      self.rmInSharedClones = true
      lastIndex = math.max(index, lastIndex)
    end
    count = count + 1
  end
  if count > 1 and not self.rmInSharedClones then
    print("WARNING : recurrentModule should be added to sharedClones in constructor.")
    print("Adding it for you.")
    assert(torch.type(self.sharedClones[lastIndex]) == torch.type(self.recurrentModule))
    self.recurrentModule = self.sharedClones[lastIndex]
    self.rmInSharedClones = true
  end
end

-- Runs f with the step clones (and extraModules) temporarily counted among self.modules,
-- so that Container methods reach every clone.
function AbstractRecurrent:includingSharedClones(f, extraModules)
  local modules, sharedClones = self.modules, self.sharedClones
  self.sharedClones = nil
  self.modules = {}
  for _, group in ipairs({ modules, sharedClones or {}, extraModules or {} }) do
    for _, module in pairs(group) do table.insert(self.modules, module) end
  end
  local results = { f() }
  self.modules, self.sharedClones = modules, sharedClones
  return unpack(results)
end

function AbstractRecurrent:type(type, tensorCache)
  return self:includingSharedClones(function() return parent.type(self, type, tensorCache) end)
end

function AbstractRecurrent:training()
  return self:includingSharedClones(function() return parent.training(self) end)
end

function AbstractRecurrent:evaluate()
  return self:includingSharedClones(function() return parent.evaluate(self) end)
end

-- reward: one per step (a table, or a tensor whose first dimension is time) or one for all.
function AbstractRecurrent:reinforce(reward)
  local count = torch.type(reward) == 'table' and #reward
    or (torch.isTensor(reward) and reward:dim() >= 2 and reward:size(1))
  if not count then
    return self:includingSharedClones(function() return parent.reinforce(self, reward) end)
  end
  assert(self.step > count, "AbstractRecurrent:reinforce: more rewards than forwarded steps")
  for i = count, 1, -1 do
    self:getStepModule(self.step - 1 - (count - i)):reinforce(reward[i])
  end
end

function AbstractRecurrent:setOutputStep(step)
  self.output = self.outputs[step]
  assert(self.output, "no output for step " .. step)
  self.gradInput = self.gradInputs[step]
end

function AbstractRecurrent:maxBPTTstep(rho) self.rho = rho end

-- step: nil for the last forwarded step, negative counts back from it.
function AbstractRecurrent:_resolveStep(step, current)
  current = current or self.step
  if step == nil then return current - 1 end
  if step < 0 then return current - step - 1 end
  return step
end

-- self.zeroTensor sized as one state for input (batch x outputSize, or outputSize for one sample)
-- when an input is given: the initial hidden state of LSTM and GRU.
function AbstractRecurrent:_zeroState(input)
  if input then
    if input:dim() == 2 then
      self.zeroTensor:resize(input:size(1), self.outputSize):zero()
    else
      self.zeroTensor:resize(self.outputSize):zero()
    end
  end
  return self.zeroTensor
end

for _, method in ipairs({ 'getHiddenState', 'setHiddenState', 'getGradHiddenState', 'setGradHiddenState' }) do
  AbstractRecurrent[method] = function() error(method .. ": Not Implemented") end
end

AbstractRecurrent.recursiveResizeAs = nn.rnn.recursiveResizeAs
AbstractRecurrent.recursiveSet = nn.rnn.recursiveSet
AbstractRecurrent.recursiveCopy = nn.rnn.recursiveCopy
AbstractRecurrent.recursiveAdd = nn.rnn.recursiveAdd
AbstractRecurrent.recursiveTensorEq = nn.rnn.recursiveTensorEq
AbstractRecurrent.recursiveNormal = nn.rnn.recursiveNormal

-- The explicit BPTT calls of rnn before 2016; backward per step replaced them.
for _, method in ipairs({ 'backwardThroughTime', 'updateGradInputThroughTime', 'accGradParametersThroughTime',
    'accUpdateGradParametersThroughTime', 'backwardUpdateThroughTime' }) do
  AbstractRecurrent[method] = function(self)
    error(('%s:%s: DEPRECATED Jan 8, 2016 (call backward once per time-step, the last step first)')
      :format(torch.type(self), method), 2)
  end
end

function AbstractRecurrent:__tostring__()
  if self.inputSize and self.outputSize then
    return self.__typename .. ('(%d -> %d)'):format(self.inputSize, self.outputSize)
  end
  return parent.__tostring__(self)
end
