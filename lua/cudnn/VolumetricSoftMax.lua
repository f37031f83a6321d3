-- cudnn.VolumetricSoftMax(fast): softmax over the planes at each position of planes x T x H x W
-- input (or a batch of them), by its `ssm` (a cudnn.SpatialSoftMax, as in cudnn.torch's files)
-- over the input with T and H folded into one dim.
local check = require 'torch.core.check'
local VolumetricSoftMax, parent = torch.class('cudnn.VolumetricSoftMax', 'nn.Module')

function VolumetricSoftMax:__init(fast)
  parent.__init(self)
  self.ssm = cudnn.SpatialSoftMax(fast)
end

function VolumetricSoftMax:_fold(t)
  if not torch.isTensor(t) or (t:dim() ~= 4 and t:dim() ~= 5) then
    check.error(('%s: 4D (planes x T x H x W) or 5D (batch x planes x T x H x W) input expected, got %s'):format(
      torch.type(self), torch.isTensor(t) and check.sizestr(t) or torch.type(t)))
  end
  local s = t:size()
  local d = t:dim()
  if d == 4 then return t:contiguous():view(s[1], s[2] * s[3], s[4]) end
  return t:contiguous():view(s[1], s[2], s[3] * s[4], s[5])
end

function VolumetricSoftMax:updateOutput(input)
  self.output = self.ssm:updateOutput(self:_fold(input)):viewAs(input)
  return self.output
end

function VolumetricSoftMax:updateGradInput(input, gradOutput)
  if not torch.isTensor(gradOutput) or not gradOutput:isSameSizeAs(input) then
    check.error(('%s: gradOutput size %s does not match input size %s'):format(torch.type(self),
      torch.isTensor(gradOutput) and check.sizestr(gradOutput) or torch.type(gradOutput), check.sizestr(input)))
  end
  self.gradInput = self.ssm:updateGradInput(self:_fold(input), self:_fold(gradOutput)):viewAs(input)
  return self.gradInput
end

function VolumetricSoftMax:clearDesc() end

function VolumetricSoftMax:clearState()
  self.ssm:clearState()
  return parent.clearState(self)
end
