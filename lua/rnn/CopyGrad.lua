-- nn.CopyGrad: the identity whose gradInput is a copy of gradOutput (not the same tensor), so
-- modules before it may keep or modify it.
local CopyGrad = torch.class('nn.CopyGrad', 'nn.Identity')

function CopyGrad:updateGradInput(input, gradOutput)
  self.gradInput:resizeAs(gradOutput):copy(gradOutput)
  return self.gradInput
end
