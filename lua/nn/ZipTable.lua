-- Transposes a table of tables: { {a1, a2}, {b1, b2} } -> { {a1, b1}, {a2, b2} }.
local check = require 'torch.core.check'
local ZipTable, parent = torch.class('nn.ZipTable', 'nn.Module')

function ZipTable:__init()
  parent.__init(self)
  self.output = {}
  self.gradInput = {}
end

local function zip(module, outer, what)
  if torch.type(outer) ~= 'table' then
    check.error(('%s: %s must be a table of tables, got %s'):format(torch.type(module), what, torch.type(outer)))
  end
  local zipped = {}
  for i, inner in ipairs(outer) do
    if torch.type(inner) ~= 'table' then
      check.error(('%s: %s[%d] must be a table, got %s'):format(torch.type(module), what, i, torch.type(inner)))
    end
    for j, x in ipairs(inner) do
      zipped[j] = zipped[j] or {}
      zipped[j][i] = x
    end
  end
  return zipped
end

function ZipTable:updateOutput(input)
  self.output = zip(self, input, 'input')
  return self.output
end

function ZipTable:updateGradInput(input, gradOutput)
  self.gradInput = zip(self, gradOutput, 'gradOutput')
  return self.gradInput
end
