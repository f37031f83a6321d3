-- Per-feature weighted sums of kW-frame windows (every dW frames) of nInputFrame x
-- inputFrameSize input: out[t][f] = bias[f] + weight[f] * sum of the window's frames[f].
local temporal = require 'nn.util.temporal'
local backend = require 'torch.backend'
local shape = require 'nn.util.shape'
local TemporalSubSampling, parent = torch.class('nn.TemporalSubSampling', 'nn.Module')

function TemporalSubSampling:__init(inputFrameSize, kW, dW)
  parent.__init(self)
  self.inputFrameSize, self.kW, self.dW = inputFrameSize, kW, dW or 1
  shape.positive(self, 'inputFrameSize, kW and dW', inputFrameSize, kW, self.dW)
  self.weight = torch.Tensor(inputFrameSize)
  self.bias = torch.Tensor(inputFrameSize)
  self.gradWeight = torch.Tensor(inputFrameSize)
  self.gradBias = torch.Tensor(inputFrameSize)
  self:reset()
end

function TemporalSubSampling:reset(stdv)
  stdv = stdv and stdv * math.sqrt(3) or 1 / math.sqrt(self.kW)
  self.weight:uniform(-stdv, stdv)
  self.bias:uniform(-stdv, stdv)
end

-- 2D input only, as torch7
function TemporalSubSampling:_check(input)
  if torch.isTensor(input) and input:dim() ~= 2 then
    shape.fail(self, 'expected 2D (frames x features) input, got %dD input of size %s', input:dim(),
      table.concat(input:size():totable(), 'x'))
  end
  local _, _, nIF, nOF = temporal.frames(self, input, self.inputFrameSize)
  return nIF, nOF
end

function TemporalSubSampling:updateOutput(input)
  local nIF, nOF = self:_check(input)
  self.output:resize(nOF, self.inputFrameSize)
  backend.of(input).temporal_subsample('forward', input:contiguous(), self.output, self.weight, self.bias, nIF, nOF,
    self.inputFrameSize, self.kW, self.dW)
  return self.output
end

function TemporalSubSampling:updateGradInput(input, gradOutput)
  local nIF, nOF = self:_check(input)
  shape.gradOutput(self, gradOutput, { nOF, self.inputFrameSize })
  self.gradInput:resizeAs(input)
  self.gradInput:zero()
  backend.of(input).temporal_subsample('backward', self.gradInput, gradOutput:contiguous(), self.weight, nil, nIF, nOF,
    self.inputFrameSize, self.kW, self.dW)
  return self.gradInput
end

function TemporalSubSampling:accGradParameters(input, gradOutput, scale)
  local nIF, nOF = self:_check(input)
  shape.gradOutput(self, gradOutput, { nOF, self.inputFrameSize })
  backend.of(input).temporal_subsample('acc', input:contiguous(), gradOutput:contiguous(), self.gradWeight, self.gradBias,
    nIF, nOF, self.inputFrameSize, self.kW, self.dW, scale)
end
