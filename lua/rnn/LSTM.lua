-- nn.LSTM(inputSize, outputSize[, rho, cell2gate, p, mono]): long short-term memory with
-- peephole (cell-to-gate, diagonal) connections unless cell2gate == false:
--   i = s(Wxi x + Whi h + wci.c),  f = s(Wxf x + Whf h + wcf.c),  z = tanh(Wxz x + Whz h)
--   c' = f.c + i.z,  o = s(Wxo x + Who h + wco.c'),  h' = o.tanh(c')
-- p > 0 puts lazy Dropout before every input and hidden projection (Bayesian LSTM).
local LSTM, parent = torch.class('nn.LSTM', 'nn.AbstractRecurrent')

function LSTM:__init(inputSize, outputSize, rho, cell2gate, p, mono)
  parent.__init(self, rho or 9999)
  self.p = p or 0
  self.mono = mono or false
  self.inputSize = inputSize
  self.outputSize = outputSize or inputSize
  self.cell2gate = cell2gate ~= false
  self.recurrentModule = self:buildModel()
  self.modules[1] = self.recurrentModule
  self.sharedClones[1] = self.recurrentModule
  self.zeroTensor = torch.Tensor() -- the initial hidden state and final gradient
  self.cells = {}
  self.gradCells = {}
end

function LSTM:dropout() return nn.Dropout(self.p, false, false, true, self.mono) end

-- x -> Linear and h -> LinearNoBias, each after a dropout.
function LSTM:projections()
  return nn.Sequential():add(self:dropout()):add(nn.Linear(self.inputSize, self.outputSize)),
    nn.Sequential():add(self:dropout()):add(nn.LinearNoBias(self.outputSize, self.outputSize))
end

-- {x, h, c} -> sigmoid gate
function LSTM:buildGate()
  local gate = nn.Sequential()
  if not self.cell2gate then gate:add(nn.NarrowTable(1, 2)) end
  local fromInput, fromHidden = self:projections()
  local branches = nn.ParallelTable():add(fromInput):add(fromHidden)
  if self.cell2gate then branches:add(nn.CMul(self.outputSize)) end
  return gate:add(branches):add(nn.CAddTable()):add(nn.Sigmoid())
end

function LSTM:buildInputGate()
  self.inputGate = self:buildGate()
  return self.inputGate
end

function LSTM:buildForgetGate()
  self.forgetGate = self:buildGate()
  return self.forgetGate
end

-- {x, h, c} -> tanh(Wxz x + Whz h)
function LSTM:buildHidden()
  local fromInput, fromHidden = self:projections()
  self.hiddenLayer = nn.Sequential()
    :add(nn.NarrowTable(1, 2))
    :add(nn.ParallelTable():add(fromInput):add(fromHidden))
    :add(nn.CAddTable())
    :add(nn.Tanh())
  return self.hiddenLayer
end

-- {x, h, c} -> f.c + i.z
function LSTM:buildCell()
  self.inputGate = self:buildInputGate()
  self.forgetGate = self:buildForgetGate()
  self.hiddenLayer = self:buildHidden()
  local function product(a, b) return nn.Sequential():add(nn.ConcatTable():add(a):add(b)):add(nn.CMulTable()) end
  self.cellLayer = nn.Sequential()
    :add(nn.ConcatTable()
      :add(product(self.forgetGate, nn.SelectTable(3)))
      :add(product(self.inputGate, self.hiddenLayer)))
    :add(nn.CAddTable())
  return self.cellLayer
end

function LSTM:buildOutputGate()
  self.outputGate = self:buildGate()
  return self.outputGate
end

-- {x, h, c} -> {h', c'}
function LSTM:buildModel()
  self.cellLayer = self:buildCell()
  self.outputGate = self:buildOutputGate()
  local hidden = nn.Sequential()
    :add(nn.ConcatTable()
      :add(self.outputGate)
      :add(nn.Sequential():add(nn.SelectTable(3)):add(nn.Tanh())))
    :add(nn.CMulTable())
  return nn.Sequential()
    :add(nn.ConcatTable():add(nn.NarrowTable(1, 2)):add(self.cellLayer))
    :add(nn.FlattenTable()) -- {x, h, c'}
    :add(nn.ConcatTable():add(hidden):add(nn.SelectTable(3)))
end

-- {output, cell} after `step` (0: the initial state, zeros unless userPrevOutput/userPrevCell).
function LSTM:getHiddenState(step, input)
  step = self:_resolveStep(step)
  if step ~= 0 then return { self.outputs[step], self.cells[step] } end
  local zero = self:_zeroState(input)
  return { self.userPrevOutput or self.outputs[0] or zero, self.userPrevCell or self.cells[0] or zero }
end

function LSTM:setHiddenState(step, hiddenState)
  step = self:_resolveStep(step)
  assert(torch.type(hiddenState) == 'table' and #hiddenState == 2, "LSTM:setHiddenState expects {output, cell}")
  self.outputs[step] = hiddenState[1]
  self.cells[step] = hiddenState[2]
end

function LSTM:updateOutput(input)
  local prevOutput, prevCell = unpack(self:getHiddenState(self.step - 1, input))
  local output, cell = unpack(self:_forwardModule():updateOutput({ input, prevOutput, prevCell }))
  self.cells[self.step] = cell
  self.cell = cell
  return self:_recordOutput(output)
end

-- {gradOutput, gradCell} flowing into `step` from the step after it (zeros after the last).
function LSTM:getGradHiddenState(step)
  self.gradOutputs = self.gradOutputs or {}
  self.gradCells = self.gradCells or {}
  step = self:_resolveStep(step, self.updateGradInputStep or self.step)
  if step == self.step - 1 then
    return { self.userNextGradOutput or self.gradOutputs[step] or self.zeroTensor,
      self.userNextGradCell or self.gradCells[step] or self.zeroTensor }
  end
  return { self.gradOutputs[step], self.gradCells[step] }
end

function LSTM:setGradHiddenState(step, gradHiddenState)
  step = self:_resolveStep(step, self.updateGradInputStep or self.step)
  assert(torch.type(gradHiddenState) == 'table' and #gradHiddenState == 2,
    "LSTM:setGradHiddenState expects {gradOutput, gradCell}")
  self.gradOutputs[step] = gradHiddenState[1]
  self.gradCells[step] = gradHiddenState[2]
end

function LSTM:_stepInputs(input, step)
  local inputs = self:getHiddenState(step - 1)
  table.insert(inputs, 1, input)
  return inputs
end

function LSTM:_updateGradInput(input, gradOutput)
  assert(self.step > 1, "expecting at least one updateOutput")
  local step = self.updateGradInputStep - 1
  assert(step >= 1)
  local gradNextOutput, gradCell = unpack(self:getGradHiddenState(step))
  assert(gradNextOutput and gradCell)
  self._gradOutputs[step] = nn.rnn.recursiveCopy(self._gradOutputs[step], gradNextOutput)
  nn.rnn.recursiveAdd(self._gradOutputs[step], gradOutput)
  local gradInputs = self:getStepModule(step):updateGradInput(self:_stepInputs(input, step),
    { self._gradOutputs[step], gradCell })
  self:setGradHiddenState(step - 1, { gradInputs[2], gradInputs[3] })
  return gradInputs[1]
end

function LSTM:_accGradParameters(input, gradOutput, scale)
  local step = self.accGradParametersStep - 1
  assert(step >= 1)
  local gradOutputs = self:getGradHiddenState(step)
  gradOutputs[1] = self._gradOutputs[step] or gradOutputs[1]
  self:getStepModule(step):accGradParameters(self:_stepInputs(input, step), gradOutputs, scale)
end

function LSTM:clearState()
  self.zeroTensor:set()
  for _, name in ipairs({ 'userPrevOutput', 'userPrevCell', 'userGradPrevOutput', 'userGradPrevCell' }) do
    if self[name] then self[name]:set() end
  end
  return parent.clearState(self)
end

function LSTM:type(type, ...)
  if type then
    self:forget()
    self:clearState()
    self.zeroTensor = self.zeroTensor:type(type)
  end
  return parent.type(self, type, ...)
end
