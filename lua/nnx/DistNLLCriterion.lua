-- Negative log-likelihood against a target distribution: -sum_i target_i * log p_i, where p is
-- softmax(input) by default, input itself (inputIsProbability), exp(input)
-- (inputIsLogProbability), or softmax(-input) (inputIsADistance); the target is a probability
-- vector unless targetIsProbability = false, then softmax(target).
local DistNLLCriterion, parent = torch.class('nn.DistNLLCriterion', 'nn.Criterion')

function DistNLLCriterion:__init(opts)
  parent.__init(self)
  opts = opts or {}
  self.inputIsADistance = opts.inputIsADistance or false
  self.inputIsProbability = opts.inputIsProbability or false
  self.inputIsLogProbability = opts.inputIsLogProbability or false
  self.targetIsProbability = opts.targetIsProbability
  if self.targetIsProbability == nil then self.targetIsProbability = true end
  self.targetSoftMax = nn.SoftMax()
  self.inputLogSoftMax = nn.LogSoftMax()
  self.inputLog = nn.Log()
  self.gradLogInput = torch.Tensor()
  self.input = torch.Tensor()
end

-- The module turning (maybe negated) input into log-probabilities, nil when it already is.
function DistNLLCriterion:_toLog()
  if self.inputIsLogProbability then return nil end
  if self.inputIsProbability then return self.inputLog end
  return self.inputLogSoftMax
end

function DistNLLCriterion:normalize(input, target)
  if input:dim() ~= 1 or target:nElement() ~= input:nElement() then
    error(('nn.DistNLLCriterion: expected a 1D input and a target of the same size, got [%s] and [%s]')
      :format(table.concat(input:size():totable(), 'x'), table.concat(target:size():totable(), 'x')), 3)
  end
  self.probTarget = self.targetIsProbability and target or self.targetSoftMax:updateOutput(target)
  if self.inputIsADistance then
    self.input:resizeAs(input):copy(input):mul(-1)
  else
    self.input = input
  end
  local toLog = self:_toLog()
  self.logProbInput = toLog and toLog:updateOutput(self.input) or self.input
end

function DistNLLCriterion:updateOutput(input, target)
  self:normalize(input, target)
  self.output = -self.logProbInput:dot(self.probTarget:typeAs(self.logProbInput))
  return self.output
end

function DistNLLCriterion:updateGradInput(input, target)
  self:normalize(input, target)
  self.gradLogInput:resizeAs(input):copy(self.probTarget):mul(-1)
  local toLog = self:_toLog()
  self.gradInput = toLog and toLog:updateGradInput(self.input, self.gradLogInput) or self.gradLogInput
  if self.inputIsADistance then self.gradInput:mul(-1) end
  return self.gradInput
end
