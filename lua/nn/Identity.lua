-- Passes its input (tensor or table) through unchanged, and the gradient back likewise.
local Identity = torch.class('nn.Identity', 'nn.Module')

function Identity:updateOutput(input)
  self.output = input
  return self.output
end

function Identity:updateGradInput(input, gradOutput)
  self.gradInput = gradOutput
  return self.gradInput
end

-- output and gradInput are the caller's tensors: drop them instead of resizing them.
function Identity:clearState()
  for _, name in ipairs({ 'output', 'gradInput' }) do
    local v = self[name]
    if torch.isTensor(v) then self[name] = v.new()
    elseif torch.type(v) == 'table' then self[name] = {}
    elseif v then self[name] = nil end
  end
  return self
end
