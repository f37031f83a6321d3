-- A criterion as a module: input {prediction, target}, output a 1-element tensor holding the
-- loss; the gradient reaches the prediction (scaled by gradOutput[1]), the target gets zeros.
-- This is what calling a criterion on nodes makes: criterion({predNode, targetNode}).
local ModuleFromCriterion, parent = torch.class('nn.ModuleFromCriterion', 'nn.Module')

function ModuleFromCriterion:__init(criterion)
  parent.__init(self)
  self.criterion = criterion
  self.output = torch.Tensor(1)
  self.gradInput = { torch.Tensor(), torch.Tensor() }
end

local function scale(x, s)
  if torch.isTensor(x) then x:mul(s) else for _, v in pairs(x) do scale(v, s) end end
end

function ModuleFromCriterion:updateOutput(input)
  local prediction, target = unpack(input)
  self.output[1] = self.criterion:updateOutput(prediction, target)
  return self.output
end

function ModuleFromCriterion:updateGradInput(input, gradOutput)
  local prediction, target = unpack(input)
  local grad = self.criterion:updateGradInput(prediction, target)
  self.gradInput[1] = nn.utils.recursiveCopy(self.gradInput[1], grad)
  scale(self.gradInput[1], gradOutput[1])
  self.gradInput[2] = nn.utils.recursiveFill(nn.utils.recursiveResizeAs(self.gradInput[2], target), 0)
  return self.gradInput
end
