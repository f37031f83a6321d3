-- The variance-reduced REINFORCE criterion of classification: input {classScores (batch x
-- classes), baseline (batch)}, target class indices. The reward is scale for each example whose
-- argmax is its target, else 0; the loss is -sum(reward) (/ batch with sizeAverage). Backward
-- hands reward - baseline (/ batch) to module:reinforce (the model's Reinforce modules), gives
-- the scores no gradient, and trains the baseline towards the reward with criterion (MSE).
local VRClassReward, parent = torch.class('nn.VRClassReward', 'nn.Criterion')

function VRClassReward:__init(module, scale, criterion)
  parent.__init(self)
  self.module = module
  self.scale = scale or 1
  self.criterion = criterion or nn.MSECriterion()
  self.sizeAverage = true
  self.gradInput = { torch.Tensor() }
end

local function checkTable(self, input)
  if torch.type(input) ~= 'table' then
    error(('%s: expecting the input {prediction, baseline}, got %s'):format(torch.type(self), torch.type(input)), 4)
  end
end

-- The predictions as a batch (one example: a batch of one, undone by fromBatch).
function VRClassReward:_batch(input) return self:toBatch(input, 1) end

-- A 0/1 tensor: which examples of the batch are classified right.
function VRClassReward:_hits(input, target)
  self._maxVal = self._maxVal or input.new()
  self._maxIdx = self._maxIdx or torch.LongTensor()
  self._maxVal:max(self._maxIdx, input, 2)
  self._target = self._target or torch.LongTensor()
  self._target:resize(target:nElement()):copy(target)
  return self._maxIdx:view(-1):eq(self._target)
end

function VRClassReward:updateOutput(input, target)
  checkTable(self, input)
  local predictions = self:_batch(input[1])
  local hits = self:_hits(predictions, target)
  self.reward = self.reward or predictions.new()
  self.reward:resize(hits:nElement()):copy(hits):mul(self.scale)
  self.output = -self.reward:sum()
  if self.sizeAverage then self.output = self.output / predictions:size(1) end
  return self.output
end

function VRClassReward:updateGradInput(input, target)
  checkTable(self, input)
  local predictions = self:_batch(input[1])
  local batchSize = predictions:size(1)
  self.gradInput[1] = self:fromBatch(self.gradInput[1]:resizeAs(predictions):zero(), 1)
  local baseline = self:toBatch(input[2], 1)
  self.vrReward = self.vrReward or self.reward.new()
  self.vrReward:resizeAs(self.reward):copy(self.reward):add(-1, baseline:view(-1))
  if self.sizeAverage then self.vrReward:div(batchSize) end
  self.module:reinforce(self.vrReward)
  self.criterion:forward(baseline, self.reward)
  self.gradInput[2] = self:fromBatch(self.criterion:backward(baseline, self.reward), 1)
  return self.gradInput
end

-- The module is the model it rewards: converting the criterion leaves it alone.
function VRClassReward:type(name, tensorCache)
  self._maxVal, self._maxIdx, self._target = nil, nil, nil
  local module = self.module
  self.module = nil
  local result = parent.type(self, name, tensorCache)
  self.module = module
  return result
end
