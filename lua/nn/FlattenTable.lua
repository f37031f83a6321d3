-- Flattens nested tables of tensors into one flat table, in depth-first order; the gradient
-- is the flat gradOutput put back into the input's nesting.
local check = require 'torch.core.check'
local FlattenTable, parent = torch.class('nn.FlattenTable', 'nn.Module')

function FlattenTable:__init()
  parent.__init(self)
  self.output = {}
  self.input_map = {}
  self.gradInput = {}
end

-- Appends input's tensors to output; returns the map: input's nesting with each tensor
-- replaced by its position in output.
local function flatten(output, input)
  if torch.type(input) ~= 'table' then
    output[#output + 1] = input
    return #output
  end
  local map = {}
  for i = 1, #input do map[i] = flatten(output, input[i]) end
  return map
end

-- Whether `map` still describes input and flat (so the last flattening can be kept).
local function matches(flat, input, map)
  if torch.type(input) == 'table' then
    if torch.type(map) ~= 'table' or #input ~= #map then return false end
    for i = 1, #input do
      if not matches(flat, input[i], map[i]) then return false end
    end
    return true
  end
  return type(map) == 'number' and flat[map] == input
end

local function unflatten(flat, map)
  if type(map) == 'number' then return flat[map] end
  local nested = {}
  for i = 1, #map do nested[i] = unflatten(flat, map[i]) end
  return nested
end

local function checkTable(self, x, what)
  if torch.type(x) ~= 'table' then
    check.error(('%s: %s must be a table, got %s'):format(torch.type(self), what, torch.type(x)))
  end
end

function FlattenTable:updateOutput(input)
  checkTable(self, input, 'input')
  if not matches(self.output, input, self.input_map) then
    self.output = {}
    self.input_map = flatten(self.output, input)
  end
  return self.output
end

function FlattenTable:updateGradInput(input, gradOutput)
  checkTable(self, input, 'input')
  checkTable(self, gradOutput, 'gradOutput')
  if not matches(gradOutput, self.gradInput, self.input_map) then
    self.gradInput = unflatten(gradOutput, self.input_map)
  end
  return self.gradInput
end

-- Only references are held: a type change just forgets them.
function FlattenTable:type()
  return self:clearState()
end

function FlattenTable:clearState()
  self.input_map = {}
  self.output, self.gradInput = {}, {}
  return self
end
