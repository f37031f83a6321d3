-- 1D convolution over frames: input nInputFrame x inputFrameSize (or batch x ...), output
-- nOutputFrame x outputFrameSize with nOutputFrame = (nInputFrame - kW) / dW + 1. Each window
-- of kW frames is kW*inputFrameSize contiguous elements, so the windows are a strided view of
-- the input multiplied by the weight (outputFrameSize x inputFrameSize*kW) in one GEMM per
-- sequence.
local temporal = require 'nn.util.temporal'
local shape = require 'nn.util.shape'

local backend = require 'torch.backend'
local TemporalConvolution, parent = torch.class('nn.TemporalConvolution', 'nn.Module')

-- The passes are the op table's temporal_conv_forward, _grad_input, _acc_grad (nn_temporal).

function TemporalConvolution:__init(inputFrameSize, outputFrameSize, kW, dW)
  parent.__init(self)
  self.inputFrameSize, self.outputFrameSize = inputFrameSize, outputFrameSize
  self.kW, self.dW = kW, dW or 1
  shape.positive(self, 'frame sizes, kW and dW', inputFrameSize, outputFrameSize, kW, self.dW)
  self.weight = torch.Tensor(outputFrameSize, inputFrameSize * kW)
  self.bias = torch.Tensor(outputFrameSize)
  self.gradWeight = torch.Tensor(outputFrameSize, inputFrameSize * kW)
  self.gradBias = torch.Tensor(outputFrameSize)
  self:reset()
end

function TemporalConvolution:reset(stdv)
  stdv = stdv and stdv * math.sqrt(3) or 1 / math.sqrt(self.kW * self.inputFrameSize)
  self.weight:uniform(-stdv, stdv)
  self.bias:uniform(-stdv, stdv)
end

function TemporalConvolution:_sizes(batch, B, nOF)
  if batch then return { B, nOF, self.outputFrameSize } end
  return { nOF, self.outputFrameSize }
end

function TemporalConvolution:updateOutput(input)
  local batch, B, nIF, nOF = temporal.frames(self, input, self.inputFrameSize)
  self.output:resize(self:_sizes(batch, B, nOF))
  local out = self.output:view(B, nOF, self.outputFrameSize)
  backend.of(input).temporal_conv_forward(out, input:contiguous():view(B, nIF, self.inputFrameSize), self.weight,
    self.bias, self.kW, self.dW)
  return self.output
end

function TemporalConvolution:updateGradInput(input, gradOutput)
  if not self.gradInput then return end
  local batch, B, nIF, nOF = temporal.frames(self, input, self.inputFrameSize)
  shape.gradOutput(self, gradOutput, self:_sizes(batch, B, nOF))
  local g = gradOutput:contiguous():view(B, nOF, self.outputFrameSize)
  self.gradInput:resizeAs(input)
  backend.of(input).temporal_conv_grad_input(self.gradInput:view(B, nIF, self.inputFrameSize), g, self.weight,
    self.kW, self.dW)
  return self.gradInput
end

function TemporalConvolution:accGradParameters(input, gradOutput, scale)
  local batch, B, nIF, nOF = temporal.frames(self, input, self.inputFrameSize)
  shape.gradOutput(self, gradOutput, self:_sizes(batch, B, nOF))
  local g = gradOutput:contiguous():view(B, nOF, self.outputFrameSize)
  if backend.onHost(input) and not self.gradWeight:isContiguous() then
    shape.fail(self, 'gradWeight must be contiguous')
  end
  backend.of(input).temporal_conv_acc_grad(self.gradWeight, self.gradBias,
    input:contiguous():view(B, nIF, self.inputFrameSize), g, scale or 1, self.kW, self.dW)
end

function TemporalConvolution:clearState() return parent.clearState(self, '_windows') end
