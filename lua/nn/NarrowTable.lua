-- Outputs the `length` entries of the input table starting at `offset`; the gradient is zero
-- for the others.
require 'nn.utils'
local check = require 'torch.core.check'
local NarrowTable, parent = torch.class('nn.NarrowTable', 'nn.Module')

function NarrowTable:__init(offset, length)
  parent.__init(self)
  self.offset = check.int('nn.NarrowTable', offset, 'offset')
  self.length = check.optInt('nn.NarrowTable', length, 'length') or 1
  self.output = {}
  self.gradInput = {}
end

local function validate(self, input)
  if torch.type(input) ~= 'table' then
    check.error(('%s: input must be a table, got %s'):format(torch.type(self), torch.type(input)))
  end
  local last = self.offset + self.length - 1
  if self.offset < 1 or last > #input then
    check.error(('%s: entries %d to %d out of range of an input table of %d entries'):format(
      torch.type(self), self.offset, last, #input))
  end
end

function NarrowTable:updateOutput(input)
  validate(self, input)
  for k in pairs(self.output) do self.output[k] = nil end
  for i = 1, self.length do self.output[i] = input[self.offset + i - 1] end
  return self.output
end

function NarrowTable:updateGradInput(input, gradOutput)
  validate(self, input)
  for i = 1, #input do
    local j = i - self.offset + 1
    if j >= 1 and j <= self.length then
      self.gradInput[i] = gradOutput[j]
    else
      self.gradInput[i] = nn.utils.recursiveResizeAs(self.gradInput[i], input[i])
      nn.utils.recursiveFill(self.gradInput[i], 0)
    end
  end
  for i = #self.gradInput, #input + 1, -1 do self.gradInput[i] = nil end
  return self.gradInput
end

function NarrowTable:type(name, cache)
  self.output = {}
  self.gradInput = {}
  return parent.type(self, name, cache)
end

function NarrowTable:clearState()
  self.output, self.gradInput = {}, {}
  return self
end
