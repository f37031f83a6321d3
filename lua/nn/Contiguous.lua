-- The input itself when contiguous, else a contiguous copy (same for the gradient).
local check = require 'torch.core.check'
local Contiguous, parent = torch.class('nn.Contiguous', 'nn.Module')

local function contiguous(result, t)
  if t:isContiguous() then return result:set(t) end
  return result:resizeAs(t):copy(t)
end

function Contiguous:updateOutput(input)
  check.tensorOf('nn.Contiguous', input, 'input')
  return contiguous(self.output, input)
end

function Contiguous:updateGradInput(input, gradOutput)
  check.sameElements('nn.Contiguous', input, gradOutput)
  return contiguous(self.gradInput, gradOutput)
end
