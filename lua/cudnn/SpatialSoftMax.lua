-- cudnn.SpatialSoftMax(fast): cuDNN's softmax, in one of its modes (`mode`) and algorithms
-- (`algorithm`): CUDNN_SOFTMAX_MODE_CHANNEL normalizes over the planes at each position,
-- CUDNN_SOFTMAX_MODE_INSTANCE over all of a sample's values; CUDNN_SOFTMAX_LOG gives the
-- log-softmax. As cuDNN sees tensors as batch x planes x H x W, a 1D input is one sample's
-- planes, 2D a batch of them, 3D one sample's planes x H x W. cudnn.SoftMax, LogSoftMax and
-- SpatialLogSoftMax are this module with other settings.
local check = require 'torch.core.check'
local softmax = require 'nn.util.softmax'

local SpatialSoftMax, parent = torch.class('cudnn.SpatialSoftMax', 'nn.Module')

function SpatialSoftMax:__init(fast)
  parent.__init(self)
  self.algorithm = fast and 'CUDNN_SOFTMAX_FAST' or 'CUDNN_SOFTMAX_ACCURATE'
end

-- t (contiguous) as batch x planes x positions x 1, or as batch x values when the softmax
-- runs over a whole row (instance mode, or no positions).
function SpatialSoftMax:_view(t)
  local nd = torch.isTensor(t) and t:dim() or 0
  if nd < 1 or nd > 4 then
    check.error(('%s: 1D, 2D, 3D or 4D input expected, got %s'):format(torch.type(self),
      torch.isTensor(t) and check.sizestr(t) or torch.type(t)))
  end
  local N = (nd == 2 or nd == 4) and t:size(1) or 1
  local C = t:size(nd % 2 == 0 and 2 or 1)
  local S = t:nElement() / math.max(N * C, 1)
  if (self.mode or 'CUDNN_SOFTMAX_MODE_CHANNEL') == 'CUDNN_SOFTMAX_MODE_INSTANCE' or S == 1 then
    return t:view(N, C * S)
  end
  return t:view(N, C, S, 1)
end

function SpatialSoftMax:_isLog() return self.algorithm == 'CUDNN_SOFTMAX_LOG' end

function SpatialSoftMax:updateOutput(input)
  local sized = self:_view(input:contiguous())
  local forward = self:_isLog() and softmax.logForward or softmax.forward
  self.output = forward(self, self.output:resizeAs(sized), sized):viewAs(input)
  return self.output
end

function SpatialSoftMax:updateGradInput(input, gradOutput)
  local sized = self:_view(input:contiguous())
  if not torch.isTensor(gradOutput) or gradOutput:nElement() ~= input:nElement() then
    check.error(('%s: gradOutput size %s does not match input size %s'):format(torch.type(self),
      torch.isTensor(gradOutput) and check.sizestr(gradOutput) or torch.type(gradOutput), check.sizestr(input)))
  end
  local output = self.output:view(sized:size())
  local backward = self:_isLog() and softmax.logBackward or softmax.backward
  self.gradInput:resizeAs(sized)
  backward(self, self.gradInput, sized, gradOutput:contiguous():viewAs(sized), output)
  self.gradInput = self.gradInput:viewAs(input)
  return self.gradInput
end

function SpatialSoftMax:clearDesc() end

function SpatialSoftMax:clearState()
  return parent.clearState(self, '_max', '_idx', '_sum', '_buf')
end

function SpatialSoftMax:type(name, cache)   -- the buffers (a LongTensor among them) are remade
  if name then self._max, self._idx, self._sum, self._buf = nil, nil, nil, nil end
  return parent.type(self, name, cache)
end
