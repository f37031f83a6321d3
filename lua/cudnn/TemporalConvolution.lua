-- cudnn.TemporalConvolution(inputFrameSize, outputFrameSize, kH, dH, padH): nn's temporal
-- convolution (kernel kH frames, stride dH) with padH zero frames before and after the
-- sequence. cudnn.torch's files (a one-plane spatial convolution) are read by nn's upgrade.
local tuning = require 'cudnn.tuning'

local TemporalConvolution, parent = torch.class('cudnn.TemporalConvolution', 'nn.TemporalConvolution')
tuning(TemporalConvolution)

function TemporalConvolution:__init(inputFrameSize, outputFrameSize, kH, dH, padH)
  parent.__init(self, inputFrameSize, outputFrameSize, kH, dH)
  self.padH = padH or 0
end

-- input with padH zero frames at each end of its frame dim (input itself without padding)
function TemporalConvolution:_padded(input)
  local pad = self.padH or 0
  if pad == 0 or not torch.isTensor(input) or input:dim() < 2 then return input end
  local dim = input:dim() - 1
  local sizes = input:size()
  sizes[dim] = sizes[dim] + 2 * pad
  self._paddedInput = self._paddedInput or input.new()
  local p = self._paddedInput:typeAs(input):resize(sizes):zero()
  p:narrow(dim, pad + 1, input:size(dim)):copy(input)
  return p
end

function TemporalConvolution:updateOutput(input)
  return parent.updateOutput(self, self:_padded(input))
end

function TemporalConvolution:updateGradInput(input, gradOutput)
  local pad = self.padH or 0
  if pad == 0 then return parent.updateGradInput(self, input, gradOutput) end
  self.gradInput = self._paddedGrad or input.new()
  self._paddedGrad = parent.updateGradInput(self, self:_padded(input), gradOutput)
  local dim = input:dim() - 1
  self.gradInput = self._paddedGrad:narrow(dim, pad + 1, input:size(dim))
  return self.gradInput
end

function TemporalConvolution:accGradParameters(input, gradOutput, scale)
  return parent.accGradParameters(self, self:_padded(input), gradOutput, scale)
end

function TemporalConvolution:clearState()
  self._paddedGrad = nil
  nn.utils.clear(self, '_paddedInput')
  return parent.clearState(self)
end
