-- Softmax and log-softmax along the class dim of a 1D (classes), 2D (batch x classes),
-- 3D (classes x h x w) or 4D (batch x classes x h x w) input, with tensor ops: a max, a sum
-- and a few elementwise passes. `m` is the module (its buffers _max, _idx, _sum, _buf).
local check = require 'torch.core.check'
local backend = require 'torch.backend'
local extremum = require 'nn.util.extremum'

local softmax = {}

local classDim = { 1, 2, 1, 2 }

function softmax.dim(m, input)
  local d = torch.isTensor(input) and classDim[input:dim()]
  if not d then
    check.error(('%s: 1D, 2D, 3D or 4D tensor expected, got %s'):format(torch.type(m),
      torch.isTensor(input) and check.sizestr(input) or torch.type(input)))
  end
  return d
end

-- gradOutput and the last forward's output (the backward passes read it) must be input's size.
local function checkGradOutput(m, input, gradOutput, output)
  local d = softmax.dim(m, input)
  if not torch.isTensor(gradOutput) or not gradOutput:isSameSizeAs(input) then
    check.error(('%s: gradOutput size %s does not match input size %s'):format(torch.type(m),
      torch.isTensor(gradOutput) and check.sizestr(gradOutput) or torch.type(gradOutput),
      check.sizestr(input)))
  end
  if not torch.isTensor(output) or not output:isSameSizeAs(input) then
    check.error(('%s: the output of the last forward (%s) does not match input size %s: call forward with this input before backward')
      :format(torch.type(m), torch.isTensor(output) and check.sizestr(output) or torch.type(output),
        check.sizestr(input)))
  end
  return d
end

local function buffers(m, input)
  m._max = m._max or input.new()
  m._idx = m._idx or extremum.indexTensor(input)
  m._sum = m._sum or input.new()
  m._buf = m._buf or input.new()
end

-- output = input - max(input) over the class dim (so that exp cannot overflow).
local function shifted(m, output, input, d)
  buffers(m, input)
  torch.max(m._max, m._idx, input, d)
  output:resizeAs(input):add(input, -1, m._max:expandAs(input))
end

function softmax.forward(m, output, input, sign)
  local d = softmax.dim(m, input)
  buffers(m, input)
  if sign then input = m._buf:resizeAs(input):mul(input, sign) end  -- SoftMin: softmax(-x)
  shifted(m, output, input, d)
  output:exp()
  torch.sum(m._sum, output, d)
  output:cdiv(m._sum:expandAs(output))
  return output
end

-- gradInput = y * (gradOutput - sum(gradOutput * y)), times sign.
function softmax.backward(m, gradInput, input, gradOutput, output, sign)
  local d = checkGradOutput(m, input, gradOutput, output)
  buffers(m, input)
  m._buf:resizeAs(output):cmul(gradOutput, output)
  torch.sum(m._sum, m._buf, d)
  gradInput:resizeAs(output):add(gradOutput, -1, m._sum:expandAs(output)):cmul(output)
  if sign then gradInput:mul(sign) end
  return gradInput
end

------------------------------------------------------------------------------------------------
-- Rows of contiguous 1-D / 2-D Float and Double tensors: the op table's loops
-- (log_softmax_rows_forward / _backward, nn_pointwise), false where they do not apply.

-- y = x - max(x) - log(sum(exp(x - max(x)))) per row; false where the rows' loop does not apply.
local function logForwardRows(m, output, input)
  output:resizeAs(input)
  if not (m._buf and getmetatable(m._buf) == getmetatable(input)) then m._buf = input.new() end
  return backend.of(input).log_softmax_rows_forward(output, input, m._buf:resizeAs(input))
end

-- gradInput = gradOutput - exp(y) * sum(gradOutput) per row (exp(y) in m._buf: gradInput may
-- be gradOutput); false where the rows' loop does not apply.
local function logBackwardRows(m, gradInput, gradOutput, output)
  gradInput:resizeAs(output)
  if not (m._buf and getmetatable(m._buf) == getmetatable(output)) then m._buf = output.new() end
  return backend.of(output).log_softmax_rows_backward(gradInput, gradOutput, output, m._buf:resizeAs(output))
end

------------------------------------------------------------------------------------------------

function softmax.logForward(m, output, input)
  local d = softmax.dim(m, input)
  if logForwardRows(m, output, input) then return output end
  shifted(m, output, input, d)
  m._buf:resizeAs(output):exp(output)
  torch.sum(m._sum, m._buf, d):log()
  output:add(-1, m._sum:expandAs(output))
  return output
end

-- gradInput = gradOutput - exp(y) * sum(gradOutput).
function softmax.logBackward(m, gradInput, input, gradOutput, output)
  local d = checkGradOutput(m, input, gradOutput, output)
  if logBackwardRows(m, gradInput, gradOutput, output) then return gradInput end
  buffers(m, input)
  torch.sum(m._sum, gradOutput, d)
  gradInput:resizeAs(output):exp(output):cmul(m._sum:expandAs(output))
  gradInput:mul(-1):add(gradOutput)
  return gradInput
end

-- Installs the module methods on cls: 'soft' (sign -1 for SoftMin) or 'log'.
-- oneDNN's softmax / log-softmax along the class dim (the op table's nn_softmax_forward /
-- _backward: contiguous Float on the host, where its measured limits say it pays); false where
-- it declines, and then the passes above run.
local function fastForward(m, kind, output, input)
  -- not log-softmax's: oneDNN's log of the sum is off by up to 3.5e-6, and a class whose
  -- probability is near 1 can come out above 0
  if kind == 'log' or not torch.isTensor(input) then return false end
  softmax.dim(m, input)
  output:resizeAs(input)
  return backend.of(input).nn_softmax_forward(kind, output, input)
end

local function fastBackward(m, kind, gradInput, input, gradOutput, output)
  checkGradOutput(m, input, gradOutput, output)
  gradInput:resizeAs(output)
  return backend.of(output).nn_softmax_backward(kind, gradInput, gradOutput, output)
end

function softmax.define(cls, kind, sign)
  local fwd = kind == 'log' and softmax.logForward or softmax.forward
  local bwd = kind == 'log' and softmax.logBackward or softmax.backward
  if sign then   -- SoftMin: softmax(-x), by the tensor ops
    function cls:updateOutput(input) return fwd(self, self.output, input, sign) end
    function cls:updateGradInput(input, gradOutput)
      return bwd(self, self.gradInput, input, gradOutput, self.output, sign)
    end
  else
    function cls:updateOutput(input)
      if fastForward(self, kind, self.output, input) then return self.output end
      return fwd(self, self.output, input)
    end
    function cls:updateGradInput(input, gradOutput)
      if fastBackward(self, kind, self.gradInput, input, gradOutput, self.output) then return self.gradInput end
      return bwd(self, self.gradInput, input, gradOutput, self.output)
    end
  end
  function cls:clearState()
    return nn.Module.clearState(self, '_max', '_idx', '_sum', '_buf')
  end
  function cls:type(name, cache)  -- the buffers (a LongTensor among them) are remade
    if name then self._max, self._idx, self._sum, self._buf = nil, nil, nil, nil end
    return nn.Module.type(self, name, cache)
  end
end

return softmax
