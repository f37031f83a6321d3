-- nn.GRU(inputSize, outputSize[, rho, p, mono]): gated recurrent units (Cho 2014)
--   r = s(Wxr x + Whr h),  z = s(Wxz x + Whz h),  n = tanh(Wxn x + Whn (r.h)),  h' = (1-z).n + z.h
-- p > 0 puts lazy Dropout before every projection (Bayesian GRU, Gal 2015).
local GRU, parent = torch.class('nn.GRU', 'nn.AbstractRecurrent')

function GRU:__init(inputSize, outputSize, rho, p, mono)
  parent.__init(self, rho or 9999)
  self.p = p or 0
  self.mono = mono or false
  self.inputSize = inputSize
  self.outputSize = outputSize
  self.recurrentModule = self:buildModel()
  self.modules[1] = self.recurrentModule
  self.sharedClones[1] = self.recurrentModule
  self.zeroTensor = torch.Tensor()
  self.cells = {}
  self.gradCells = {}
end

GRU.dropout = nn.LSTM.dropout
GRU.droppedProjections = nn.FastLSTM.droppedProjections
GRU.buildProjections = nn.FastLSTM.buildProjections

-- {x, h} -> h'
function GRU:buildModel()
  self:buildProjections(2)
  local gates = nn.Sequential() -- {x, h} -> {r, z}
    :add(nn.ParallelTable():add(self.i2g):add(self.o2g))
    :add(nn.CAddTable())
    :add(nn.Reshape(2, self.outputSize))
    :add(nn.SplitTable(1, 2))
    :add(nn.ParallelTable():add(nn.Sigmoid()):add(nn.Sigmoid()))
  local fromInput = nn.Sequential():add(nn.SelectTable(1))
  local fromReset = nn.Sequential():add(nn.NarrowTable(2, 2)):add(nn.CMulTable())
  if self.p ~= 0 then
    fromInput:add(self:dropout())
    fromReset:add(self:dropout())
  end
  fromInput:add(nn.Linear(self.inputSize, self.outputSize))
  fromReset:add(nn.LinearNoBias(self.outputSize, self.outputSize))
  local candidate = nn.Sequential():add(nn.ConcatTable():add(fromInput):add(fromReset)):add(nn.CAddTable()):add(nn.Tanh())
  local oneMinusZ = nn.Sequential():add(nn.SelectTable(4)):add(nn.SAdd(-1, true))
  local zTimesH = nn.Sequential():add(nn.NarrowTable(4, 2)):add(nn.CMulTable())
  local newPart = nn.Sequential():add(nn.ConcatTable():add(candidate):add(oneMinusZ)):add(nn.CMulTable())
  return nn.Sequential()
    :add(nn.ConcatTable():add(nn.Identity()):add(gates))
    :add(nn.FlattenTable()) -- {x, h, r, z}
    :add(nn.ConcatTable():add(nn.NarrowTable(1, 4)):add(nn.SelectTable(2)))
    :add(nn.FlattenTable()) -- {x, h, r, z, h}
    :add(nn.Sequential():add(nn.ConcatTable():add(newPart):add(zTimesH)):add(nn.CAddTable()))
end

function GRU:getHiddenState(step, input)
  step = self:_resolveStep(step)
  if step ~= 0 then return self.outputs[step] end
  local zero = self:_zeroState(input)
  return self.userPrevOutput or self.outputs[0] or zero
end

function GRU:setHiddenState(step, hiddenState)
  assert(torch.isTensor(hiddenState), "GRU:setHiddenState expects a tensor")
  self.outputs[self:_resolveStep(step)] = hiddenState
end

function GRU:updateOutput(input)
  local prevOutput = self:getHiddenState(self.step - 1, input)
  return self:_recordOutput(self:_forwardModule():updateOutput({ input, prevOutput }))
end

function GRU:getGradHiddenState(step)
  step = self:_resolveStep(step, self.updateGradInputStep or self.step)
  if step == self.step - 1 then
    return self.userNextGradOutput or self.gradOutputs[step] or self.zeroTensor
  end
  return self.gradOutputs[step]
end

function GRU:setGradHiddenState(step, gradHiddenState)
  assert(torch.isTensor(gradHiddenState), "GRU:setGradHiddenState expects a tensor")
  self.gradOutputs[self:_resolveStep(step, self.updateGradInputStep or self.step)] = gradHiddenState
end

function GRU:_updateGradInput(input, gradOutput)
  assert(self.step > 1, "expecting at least one updateOutput")
  local step = self.updateGradInputStep - 1
  assert(step >= 1)
  self._gradOutputs[step] = nn.rnn.recursiveCopy(self._gradOutputs[step], self:getGradHiddenState(step))
  nn.rnn.recursiveAdd(self._gradOutputs[step], gradOutput)
  local gradInputs = self:getStepModule(step):updateGradInput({ input, self:getHiddenState(step - 1) }, self._gradOutputs[step])
  self:setGradHiddenState(step - 1, gradInputs[2])
  return gradInputs[1]
end

function GRU:_accGradParameters(input, gradOutput, scale)
  local step = self.accGradParametersStep - 1
  assert(step >= 1)
  local gradStep = self._gradOutputs[step] or self:getGradHiddenState(step)
  self:getStepModule(step):accGradParameters({ input, self:getHiddenState(step - 1) }, gradStep, scale)
end

function GRU:__tostring__()
  return ('%s(%d -> %d, %.2f)'):format(torch.type(self), self.inputSize, self.outputSize, self.p)
end

-- Copies the 6 parameters of a non-dropout GRU into this Bayesian GRU's 9.
function GRU:migrate(params)
  local own = self:parameters()
  assert(self.p ~= 0, 'only support for BGRUs.')
  assert(#params == 6, '# of source params should be 6.')
  assert(#own == 9, '# of destination params should be 9.')
  local n = self.outputSize
  own[1]:copy(params[1]:narrow(1, 1, n))
  own[2]:copy(params[2]:narrow(1, 1, n))
  own[3]:copy(params[1]:narrow(1, n + 1, n))
  own[4]:copy(params[2]:narrow(1, n + 1, n))
  own[5]:copy(params[3]:narrow(1, 1, n))
  own[6]:copy(params[3]:narrow(1, n + 1, n))
  own[7]:copy(params[4])
  own[8]:copy(params[5])
  own[9]:copy(params[6])
end

GRU.clearState = nn.LSTM.clearState
GRU.type = nn.LSTM.type
