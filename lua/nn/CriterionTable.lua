-- A criterion as a module: forward({input, target}) is the loss; the gradient is with respect
-- to the input only.
local check = require 'torch.core.check'
local CriterionTable, parent = torch.class('nn.CriterionTable', 'nn.Module')

function CriterionTable:__init(criterion)
  parent.__init(self)
  if not torch.isTypeOf(criterion, 'nn.Criterion') then
    check.error('nn.CriterionTable: expected a criterion, got ' .. torch.type(criterion))
  end
  self.criterion = criterion
  self.gradInput = { criterion.gradInput }
end

local function validate(self, input)
  if torch.type(input) ~= 'table' or #input < 2 then
    check.error(('%s: input must be a table {input, target}, got %s'):format(
      torch.type(self), torch.type(input)))
  end
end

function CriterionTable:updateOutput(input)
  validate(self, input)
  self.output = self.criterion:updateOutput(input[1], input[2])
  return self.output
end

function CriterionTable:updateGradInput(input)
  validate(self, input)
  self.gradInput[1] = self.criterion:updateGradInput(input[1], input[2])
  return self.gradInput
end
