-- Saturation: inputs below `threshold` become `val`, inputs above `threshold2` become `val2`
-- (defaults -1, -1, 1, 1); the rest pass through, and only they pass a gradient.
local SaturatedLU, parent = torch.class('nn.SaturatedLU', 'nn.Module')

function SaturatedLU:__init(th, v, th2, v2)
  parent.__init(self)
  for _, a in ipairs({th or 0, v or 0, th2 or 0, v2 or 0}) do
    if type(a) ~= 'number' then error('nn.SaturatedLU(lower-bound, value, upper-bound, value2): numbers expected', 2) end
  end
  self.threshold, self.val = th or -1, v or -1
  self.threshold2, self.val2 = th2 or 1, v2 or 1
end

function SaturatedLU:updateOutput(input)
  self.output:resizeAs(input):copy(input)
  self.output[input:lt(self.threshold)] = self.val
  self.output[input:gt(self.threshold2)] = self.val2
  return self.output
end

function SaturatedLU:updateGradInput(input, gradOutput)
  self.gradInput:resizeAs(gradOutput):copy(gradOutput)
  self.gradInput[input:lt(self.threshold)] = 0
  self.gradInput[input:gt(self.threshold2)] = 0
  return self.gradInput
end
