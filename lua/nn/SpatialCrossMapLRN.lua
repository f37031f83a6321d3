-- Local response normalization across neighbouring planes (AlexNet):
-- y = x / (k + alpha/size * sum of x^2 over `size` neighbouring planes)^beta.
local check = require 'torch.core.check'
local lrn = require 'nn.util.lrn'
local shape = require 'nn.util.shape'
local SpatialCrossMapLRN, parent = torch.class('nn.SpatialCrossMapLRN', 'nn.Module')
SpatialCrossMapLRN._deviceKernel = true   -- device tensors: the CUDA lrn ops

function SpatialCrossMapLRN:__init(size, alpha, beta, k)
  parent.__init(self)
  shape.positive(self, 'size', size)
  self.size = size
  self.alpha = check.optNumber('nn.SpatialCrossMapLRN', alpha, 'alpha') or 0.0001
  self.beta = check.optNumber('nn.SpatialCrossMapLRN', beta, 'beta') or 0.75
  self.k = check.optNumber('nn.SpatialCrossMapLRN', k, 'k') or 1
end

function SpatialCrossMapLRN:updateOutput(input)
  local _, B, C, s = shape.input(self, input, 2)
  input = input:contiguous()
  self.scale = self.scale or input.new()
  self.scale:resizeAs(input)
  self.output:resizeAs(input)
  lrn.forward(input, self.scale, self.output, B, C, s[1] * s[2], self.size, self.alpha, self.beta, self.k)
  return self.output
end

-- Uses the scale and output of the last updateOutput (of this same input), as torch7.
function SpatialCrossMapLRN:updateGradInput(input, gradOutput)
  local _, B, C, s = shape.input(self, input, 2)
  shape.gradOutput(self, gradOutput, input:size():totable())
  if not self.scale or not self.scale:isSameSizeAs(input) then
    shape.fail(self, 'call updateOutput with this input before updateGradInput')
  end
  self._ratio = self._ratio or input.new()
  self._ratio:resizeAs(input)
  self.gradInput:resizeAs(input)
  lrn.backward(input:contiguous(), gradOutput:contiguous(), self.scale, self.output, self._ratio,
    self.gradInput, B, C, s[1] * s[2], self.size, self.alpha, self.beta)
  return self.gradInput
end

function SpatialCrossMapLRN:clearState()
  return parent.clearState(self, 'scale', '_ratio')
end
