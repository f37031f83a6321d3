-- ClassNLLCriterion over LogSoftMax: the loss of raw scores (1-D, or one row per sample)
-- against 1-based class indices.
local CrossEntropyCriterion, parent = torch.class('nn.CrossEntropyCriterion', 'nn.Criterion')

function CrossEntropyCriterion:__init(weights, sizeAverage)
  parent.__init(self)
  self.lsm = nn.LogSoftMax()
  self.nll = nn.ClassNLLCriterion(weights, sizeAverage)
  self.sizeAverage = self.nll.sizeAverage
  self.oldSizeAverage = self.sizeAverage
end

-- Scores and targets with their size-1 dims dropped (a 1xN input is one sample); a change of
-- self.sizeAverage since the last call reaches the inner criterion (setting nll.sizeAverage
-- directly keeps working too).
local function prepare(self, input, target)
  if self.sizeAverage ~= self.oldSizeAverage then
    self.nll.sizeAverage = self.sizeAverage
    self.oldSizeAverage = self.sizeAverage
  end
  if torch.isTensor(input) then input = input:squeeze() end
  if torch.isTensor(target) then target = target:squeeze() end
  return input, target
end

function CrossEntropyCriterion:updateOutput(input, target)
  input, target = prepare(self, input, target)
  self.lsm:updateOutput(input)
  self.output = self.nll:updateOutput(self.lsm.output, target)
  return self.output
end

function CrossEntropyCriterion:updateGradInput(input, target)
  local size = input:size()
  input, target = prepare(self, input, target)
  self.nll:updateGradInput(self.lsm.output, target)
  self.lsm:updateGradInput(input, self.nll.gradInput)
  self.gradInput:view(self.lsm.gradInput, size)
  return self.gradInput
end
