-- nn.Recurrence(recurrentModule, outputSize, nInputDim[, rho]): a general recurrence where
-- recurrentModule maps {input(t), output(t-1)} -> output(t); output(0) is zeros of outputSize
-- (a number, a size table, or a table of sizes for nested outputs). nInputDim tells batch mode.
local Recurrence, parent = torch.class('nn.Recurrence', 'nn.AbstractRecurrent')

function Recurrence:__init(recurrentModule, outputSize, nInputDim, rho)
  parent.__init(self, rho or 9999)
  local sizeType = torch.type(outputSize)
  assert(sizeType == 'table' or sizeType == 'torch.LongStorage' or sizeType == 'number',
    "Recurrence: unsupported outputSize type " .. sizeType)
  self.outputSize = sizeType == 'number' and { outputSize } or outputSize
  assert(torch.type(nInputDim) == 'number', "Recurrence: expecting nInputDim number for arg 3")
  self.nInputDim = nInputDim
  assert(torch.isTypeOf(recurrentModule, 'nn.Module'), "Recurrence: expecting recurrentModule nn.Module for arg 1")
  self.recurrentModule = recurrentModule
  self.module = recurrentModule
  self.modules[1] = recurrentModule
  self.sharedClones[1] = recurrentModule
  self.typeTensor = torch.Tensor()
end

-- Zeros shaped as size (nested tables of sizes allowed), with a first batch dimension when batchSize.
function Recurrence:recursiveResizeZero(tensor, size, batchSize)
  if torch.type(size) == 'table' and torch.type(size[1]) ~= 'number' then
    tensor = torch.type(tensor) == 'table' and tensor or {}
    for k, sub in ipairs(size) do tensor[k] = self:recursiveResizeZero(tensor[k], sub, batchSize) end
    return tensor
  end
  local dims
  if torch.type(size) == 'torch.LongStorage' then dims = size:totable()
  elseif torch.type(size) == 'table' then dims = { unpack(size) }
  else error("Recurrence: unknown size type : " .. torch.type(size)) end
  if batchSize then table.insert(dims, 1, batchSize) end
  tensor = torch.isTensor(tensor) and tensor or self.typeTensor.new()
  return tensor:resize(torch.LongStorage(dims)):zero()
end

-- nil without a batch dimension.
function Recurrence:getBatchSize(input, nInputDim)
  nInputDim = nInputDim or self.nInputDim
  if torch.type(input) == 'table' then return self:getBatchSize(input[1]) end
  assert(torch.isTensor(input), "Recurrence: expecting a tensor or a table of tensors")
  if input:dim() == nInputDim then return nil end
  if input:dim() - 1 == nInputDim then return input:size(1) end
  error(('Recurrence: input has %d dimensions, expecting nInputDim (%d) or nInputDim+1'):format(input:dim(), nInputDim))
end

function Recurrence:getHiddenState(step, input)
  step = self:_resolveStep(step)
  local prevOutput
  if step == 0 then
    if input then self.zeroTensor = self:recursiveResizeZero(self.zeroTensor, self.outputSize, self:getBatchSize(input)) end
    prevOutput = self.userPrevOutput or self.outputs[0] or self.zeroTensor
  else
    prevOutput = self.outputs[step]
  end
  return { prevOutput, nn.Container.getHiddenState(self, step) }
end

function Recurrence:setHiddenState(step, hiddenState)
  step = self:_resolveStep(step)
  assert(torch.type(hiddenState) == 'table' and #hiddenState >= 1, "Recurrence:setHiddenState expects {output[, inner states]}")
  self.outputs[step] = hiddenState[1]
  if hiddenState[2] then nn.Container.setHiddenState(self, step, hiddenState[2]) end
end

function Recurrence:updateOutput(input)
  local prevOutput = self:getHiddenState(self.step - 1, input)[1]
  return self:_recordOutput(self:_forwardModule():updateOutput({ input, prevOutput }))
end

function Recurrence:getGradHiddenState(step)
  step = self:_resolveStep(step, self.updateGradInputStep or self.step)
  local gradOutput
  if step == self.step - 1 then
    gradOutput = self.userNextGradOutput or self.gradOutputs[step] or self.zeroTensor
  else
    gradOutput = self.gradOutputs[step]
  end
  return { gradOutput, nn.Container.getGradHiddenState(self, step) }
end

function Recurrence:setGradHiddenState(step, gradHiddenState)
  step = self:_resolveStep(step, self.updateGradInputStep or self.step)
  assert(torch.type(gradHiddenState) == 'table' and #gradHiddenState >= 1,
    "Recurrence:setGradHiddenState expects {gradOutput[, inner gradients]}")
  self.gradOutputs[step] = gradHiddenState[1]
  if gradHiddenState[2] then nn.Container.setGradHiddenState(self, step, gradHiddenState[2]) end
end

function Recurrence:_updateGradInput(input, gradOutput)
  assert(self.step > 1, "expecting at least one updateOutput")
  local step = self.updateGradInputStep - 1
  assert(step >= 1)
  self._gradOutputs[step] = nn.rnn.recursiveCopy(self._gradOutputs[step], self:getGradHiddenState(step)[1])
  nn.rnn.recursiveAdd(self._gradOutputs[step], gradOutput)
  local gradInputs = self:getStepModule(step):updateGradInput({ input, self:getHiddenState(step - 1)[1] }, self._gradOutputs[step])
  self:setGradHiddenState(step - 1, { unpack(gradInputs, 2, #gradInputs) })
  return gradInputs[1]
end

function Recurrence:_accGradParameters(input, gradOutput, scale)
  local step = self.accGradParametersStep - 1
  assert(step >= 1)
  local gradStep = self._gradOutputs[step] or self:getGradHiddenState(step)[1]
  self:getStepModule(step):accGradParameters({ input, self:getHiddenState(step - 1)[1] }, gradStep, scale)
end

Recurrence.__tostring__ = nn.Decorator.__tostring__
