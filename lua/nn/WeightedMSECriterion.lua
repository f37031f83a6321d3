-- MSECriterion against the target scaled elementwise by a fixed weight tensor:
-- sum (x - w y)^2. For an input with one more dim than w, w applies to every sample.
local check = require 'torch.core.check'
local WeightedMSECriterion, parent = torch.class('nn.WeightedMSECriterion', 'nn.MSECriterion')
WeightedMSECriterion._deviceKernel = true   -- the parent's passes on the weighted target

function WeightedMSECriterion:__init(w)
  parent.__init(self)
  check.tensorOf('nn.WeightedMSECriterion', w, 'weight')
  self.weight = w:clone()
end

local function weightedTarget(self, input, target)
  check.tensorOf(torch.type(self), input, 'input')
  check.tensorOf(torch.type(self), target, 'target')
  local w = self.weight
  if input:dim() - 1 == w:dim() then
    local size = w:size():totable()
    table.insert(size, 1, 1)
    w = w:view(torch.LongStorage(size)):expand(target:size())
  end
  if w:nElement() ~= target:nElement() then
    check.error(('%s: weight of size %s does not match target of size %s'):format(
      torch.type(self), check.sizestr(self.weight), check.sizestr(target)))
  end
  self.buffer = self.buffer or input.new()
  self.buffer:resizeAs(target):copy(target):cmul(w)
  return self.buffer
end

function WeightedMSECriterion:updateOutput(input, target)
  return parent.updateOutput(self, input, weightedTarget(self, input, target))
end

function WeightedMSECriterion:updateGradInput(input, target)
  return parent.updateGradInput(self, input, weightedTarget(self, input, target))
end
