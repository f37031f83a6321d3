-- CTC loss (nnx's wrapper of warp-ctc, computed here by nnx.kernels.ctc): input is
-- seqLength x batch x classes (batch x seqLength x classes with batchFirst) or the
-- (seqLength*batch) x classes rows in time-major order; class 1 is the blank. target is a table
-- of label tables (labels 1-based, excluding the blank), sizes a tensor of each sequence's length.
-- As nnx: forward returns the cost summed over the batch divided by the batch size, while
-- self.output and gradInput hold the summed cost and its gradient.
local ctc = require 'nnx.util.ctc'
local CTCCriterion, parent = torch.class('nn.CTCCriterion', 'nn.Criterion')

function CTCCriterion:__init(batchFirst)
  parent.__init(self)
  self.batchFirst = batchFirst or false
  self._logSoftMax = nn.LogSoftMax()
  self._grad = torch.Tensor()
end

function CTCCriterion:forward(input, target, sizes)
  return self:updateOutput(input, target, sizes)
end

-- The activations as time-major (T*B) x D rows, and B.
function CTCCriterion:_rows(input, sizes)
  if not torch.isTensor(sizes) then
    error('nn.CTCCriterion: you must pass the size of each sequence in the batch as a tensor', 3)
  end
  local acts = input
  if input:dim() == 3 then
    if self.batchFirst then acts = acts:transpose(1, 2) end
    acts = acts:contiguous():view(acts:size(1) * acts:size(2), acts:size(3))
  elseif input:dim() ~= 2 then
    error(('nn.CTCCriterion: input must be 2D or 3D, got size [%s]')
      :format(table.concat(input:size():totable(), 'x')), 3)
  end
  return acts, sizes:size(1)
end

function CTCCriterion:updateOutput(input, target, sizes)
  local acts, B = self:_rows(input, sizes)
  local T = acts:size(1) / B
  local logy = self._logSoftMax:updateOutput(acts:double()):view(T, B, acts:size(2))
  self._grad:resize(T, B, acts:size(2)):zero()
  local total = 0
  for b = 1, B do
    local len = sizes[b]
    if len > T or len < 1 then
      error(('nn.CTCCriterion: sequence %d has length %d but the input has %d steps'):format(b, len, T), 2)
    end
    local grad = self._grad:select(2, b):narrow(1, 1, len)
    total = total + ctc.sequence(logy:select(2, b):narrow(1, 1, len), target[b], grad)
  end
  self.output = total
  return total / B
end

function CTCCriterion:updateGradInput(input, target)
  local g = self._grad
  if input:dim() == 2 then
    g = g:view(-1, g:size(3))
  elseif self.batchFirst then
    g = g:transpose(1, 2)
  end
  self.gradInput = self.gradInput:typeAs(input):resize(g:size()):copy(g)
  return self.gradInput
end
