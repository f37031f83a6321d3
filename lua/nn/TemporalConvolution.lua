-- 1D convolution over frames: input nInputFrame x inputFrameSize (or batch x ...), output
-- nOutputFrame x outputFrameSize with nOutputFrame = (nInputFrame - kW) / dW + 1. Each window
-- of kW frames is kW*inputFrameSize contiguous elements, so the windows are a strided view of
-- the input multiplied by the weight (outputFrameSize x inputFrameSize*kW) in one GEMM per
-- sequence.
local temporal = require 'nn.util.temporal'
local shape = require 'nn.util.shape'

local backend = require 'torch.backend'
local TemporalConvolution, parent = torch.class('nn.TemporalConvolution', 'nn.Module')

-- The input's backend when it is a device one (CUDA: backend/cuda/nn.lua's temporal_conv_*).
local function device(x) return backend.of(x) ~= backend.cpu and backend.of(x) end

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

-- the windows of x (B x nIF x F, contiguous) as a B x nOF x K view
local function windows(x, B, nIF, nOF, F, K, dW)
  return x.new():set(x:storage(), x:storageOffset(), torch.LongStorage { B, nOF, K },
    torch.LongStorage { nIF * F, dW * F, 1 })
end

function TemporalConvolution:_sizes(batch, B, nOF)
  if batch then return { B, nOF, self.outputFrameSize } end
  return { nOF, self.outputFrameSize }
end

function TemporalConvolution:updateOutput(input)
  local batch, B, nIF, nOF = temporal.frames(self, input, self.inputFrameSize)
  local F, O, K = self.inputFrameSize, self.outputFrameSize, self.inputFrameSize * self.kW
  self.output:resize(self:_sizes(batch, B, nOF))
  local out = self.output:view(B, nOF, O)
  if device(input) then
    device(input).temporal_conv_forward(out, input:contiguous():view(B, nIF, F), self.weight, self.bias, self.kW, self.dW)
    return self.output
  end
  local x = windows(input:contiguous(), B, nIF, nOF, F, K, self.dW)
  backend.of(out).plane_fill(out, self.bias, B * nOF, O, 1)
  local w = self.weight:contiguous():view(1, O, K):expand(B, O, K):transpose(2, 3)
  out:baddbmm(1, out, 1, x, w)
  return self.output
end

function TemporalConvolution:updateGradInput(input, gradOutput)
  if not self.gradInput then return end
  local batch, B, nIF, nOF = temporal.frames(self, input, self.inputFrameSize)
  local F, O, K = self.inputFrameSize, self.outputFrameSize, self.inputFrameSize * self.kW
  shape.gradOutput(self, gradOutput, self:_sizes(batch, B, nOF))
  local g = gradOutput:contiguous():view(B, nOF, O)
  if device(input) then
    self.gradInput:resizeAs(input)
    device(input).temporal_conv_grad_input(self.gradInput:view(B, nIF, F), g, self.weight, self.kW, self.dW)
    return self.gradInput
  end
  self._windows = self._windows or input.new()
  self._windows:resize(B, nOF, K):bmm(g, self.weight:contiguous():view(1, O, K):expand(B, O, K))
  self.gradInput:resizeAs(input)
  self.gradInput:zero()
  backend.cpu.temporal_add_frames(self._windows, self.gradInput, B, nIF, nOF, F, K, self.dW)
  return self.gradInput
end

function TemporalConvolution:accGradParameters(input, gradOutput, scale)
  local batch, B, nIF, nOF = temporal.frames(self, input, self.inputFrameSize)
  local F, O, K = self.inputFrameSize, self.outputFrameSize, self.inputFrameSize * self.kW
  shape.gradOutput(self, gradOutput, self:_sizes(batch, B, nOF))
  local g = gradOutput:contiguous():view(B, nOF, O)
  if device(input) then
    return device(input).temporal_conv_acc_grad(self.gradWeight, self.gradBias, input:contiguous():view(B, nIF, F), g,
      scale or 1, self.kW, self.dW)
  end
  local x = windows(input:contiguous(), B, nIF, nOF, F, K, self.dW)
  if not self.gradWeight:isContiguous() then shape.fail(self, 'gradWeight must be contiguous') end
  self.gradWeight:addbmm(scale or 1, g:transpose(2, 3), x)
  backend.of(g).plane_acc_sum(self.gradBias, g, B * nOF, O, 1, scale or 1)
end

function TemporalConvolution:clearState() return parent.clearState(self, '_windows') end
