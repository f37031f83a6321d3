-- The input table in reverse order ({a, b, c} -> {c, b, a}); gradients reversed back.
local ReverseTable, parent = torch.class('nn.ReverseTable', 'nn.Module')

function ReverseTable:__init()
  parent.__init(self)
  self.output, self.gradInput = {}, {}
end

local function reverseInto(out, t, op)
  if torch.type(t) ~= 'table' then
    error(('nn.ReverseTable:%s: expecting a table, got %s'):format(op, torch.type(t)), 3)
  end
  for k in pairs(out) do out[k] = nil end
  for i = #t, 1, -1 do out[#t - i + 1] = t[i] end
  return out
end

function ReverseTable:updateOutput(input) return reverseInto(self.output, input, 'updateOutput') end

function ReverseTable:updateGradInput(input, gradOutput)
  return reverseInto(self.gradInput, gradOutput, 'updateGradInput')
end
