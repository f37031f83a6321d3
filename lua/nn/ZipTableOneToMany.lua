-- Pairs one element with each entry of a table: { v, {a, b, c} } -> { {v, a}, {v, b}, {v, c} }.
-- v's gradient is the sum of the gradients of its copies.
local check = require 'torch.core.check'
local ZipTableOneToMany, parent = torch.class('nn.ZipTableOneToMany', 'nn.Module')

function ZipTableOneToMany:__init()
  parent.__init(self)
  self.output = {}
  self.gradInput = {}
  self.gradInputEl = torch.Tensor()
end

local function validate(self, input)
  if torch.type(input) ~= 'table' or #input ~= 2 or torch.type(input[2]) ~= 'table' then
    check.error(torch.type(self) .. ': input must be a table {element, table}')
  end
end

function ZipTableOneToMany:updateOutput(input)
  validate(self, input)
  self.output = {}
  for i, x in ipairs(input[2]) do self.output[i] = { input[1], x } end
  return self.output
end

function ZipTableOneToMany:updateGradInput(input, gradOutput)
  validate(self, input)
  self.gradInputEl:resizeAs(input[1]):zero()
  local rest = {}
  for i, pair in ipairs(gradOutput) do
    self.gradInputEl:add(pair[1])
    rest[i] = pair[2]
  end
  self.gradInput = { self.gradInputEl, rest }
  return self.gradInput
end
