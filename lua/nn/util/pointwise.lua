-- Elementwise layers: updateOutput / updateGradInput built from kernel bodies or tensor ops,
-- in place when the module's `inplace` field is set (output then shares input's storage, and
-- gradInput shares gradOutput's).
--   forward:  '$1 = f($2)'           $1 output, $2 input (a CPU loop); or
--   forwardOp(m, output, input, ...) tensor ops, for every device (m: the module)
--   backward: '$1 = g($2, $3, $4)'   $1 gradInput, $2 input, $3 gradOutput, $4 output; or
--   backwardOp(m, gradInput, input, gradOutput, output, ...)
--   params(self) gives the scalars (v1..v3 in the bodies, ... above).
--   deviceForward / deviceBackward(m, ...): as forwardOp / backwardOp, tensor ops that stand in
--     for the loop bodies on device (CUDA) tensors; the CPU keeps its loops.
--   op: with a backward body, the op-table name of the backward pass: the body is the CPU op
--     <op>_backward(gradInput, input, gradOutput, output, ...) and the pass calls the input's
--     backend (backend/cuda/nn.lua has the CUDA ones).
-- A module whose passes are tensor ops or backend ops runs on every device; one with a CPU
-- loop is CPU only.
local check = require 'torch.core.check'
local backend = require 'torch.backend'

local pointwise = {}

local function none() end

-- A backward body as a loop over (gradInput, input, gradOutput, output, ...). A body that never
-- reads the input loops over the other three: a strided input (an LSTM's narrowed gate) would
-- otherwise put the whole loop on its strided path.
local function backwardLoop(body)
  if body:find('$2', 1, true) then return backend.cpu.kernel(4, body) end
  local loop = backend.cpu.kernel(3, (body:gsub('%$3', '$2'):gsub('%$4', '$3')))
  return function(gradInput, _, gradOutput, output, ...) loop(gradInput, gradOutput, output, ...) end
end

local function onDevice(t) return backend.of(t) ~= backend.cpu end

-- The errors for an input that is not a CPU tensor (the loops here run on CPU memory), or a
-- gradOutput whose size differs.
function pointwise.checkInput(module, input, deviceOk)
  if not torch.isTensor(input) then
    check.error(('%s: input must be a tensor, got %s'):format(torch.type(module), torch.type(input)))
  end
  if not deviceOk and onDevice(input) then
    check.error(('%s: %s is not supported (CPU kernel)'):format(torch.type(module), torch.type(input)))
  end
  check.floating(torch.type(module), input)
end

function pointwise.checkGradOutput(module, input, gradOutput, deviceOk)
  pointwise.checkInput(module, input, deviceOk)
  if not torch.isTensor(gradOutput) then
    check.error(('%s: gradOutput must be a tensor, got %s'):format(torch.type(module),
      torch.type(gradOutput)))
  end
  if gradOutput:nElement() ~= input:nElement() then
    check.error(('%s: gradOutput size %s (%d elements) does not match input size %s (%d elements)')
      :format(torch.type(module), check.sizestr(gradOutput), gradOutput:nElement(),
        check.sizestr(input), input:nElement()))
  end
end

-- m._mask: 1 where lo < x (and x < hi when hi is given), else 0, as a tensor of x's type.
-- The compares go to byte buffers first: every step runs as a vectorized loop.
function pointwise.mask(m, x, lo, hi)
  local byteType = onDevice(x) and 'torch.CudaByteTensor' or 'torch.ByteTensor'
  if torch.type(m._above) ~= byteType then
    m._above, m._below = torch.getmetatable(byteType).new(), torch.getmetatable(byteType).new()
  end
  if torch.type(m._mask) ~= torch.type(x) then m._mask = x.new() end
  torch.gt(m._above, x, lo)
  if hi then m._above:cmul(torch.lt(m._below, x, hi)) end
  return m._mask:resize(x:size()):copy(m._above)
end

-- pass, or device: a pass that runs device when its result (the first tensor) is a device tensor.
function pointwise.onDevice(pass, device)
  if not device then return pass end
  return function(m, r, ...)
    if onDevice(r) then return device(m, r, ...) end
    return pass(m, r, ...)
  end
end

-- m[name] as a tensor of like's type and size (a scratch buffer reused across calls).
function pointwise.scratch(m, name, like)
  if torch.type(m[name]) ~= torch.type(like) then m[name] = like.new() end
  return m[name]:resizeAs(like)
end

function pointwise.define(cls, spec)
  local params = spec.params or none
  local forward, backward = spec.forwardOp, spec.backwardOp
  if not forward then
    local loop = backend.cpu.kernel(2, spec.forward)
    forward = function(_, ...) loop(...) end
  end
  if not backward then
    local loop = backwardLoop(spec.backward)
    backward = function(_, ...) loop(...) end
    if spec.op then
      local name = spec.op .. '_backward'
      backend.register('cpu', { [name] = loop })
      backward = function(_, gradInput, ...) backend.of(gradInput)[name](gradInput, ...) end
    end
  end
  forward = pointwise.onDevice(forward, spec.deviceForward)
  backward = pointwise.onDevice(backward, spec.deviceBackward)
  local deviceOk = (spec.forwardOp or spec.deviceForward) ~= nil
    and (spec.backwardOp or spec.op or spec.deviceBackward) ~= nil

  function cls:updateOutput(input)
    pointwise.checkInput(self, input, deviceOk)
    if self.inplace then
      forward(self, input, input, params(self))
      self.output:set(input)
    else
      self.output:resizeAs(input)
      forward(self, self.output, input, params(self))
    end
    return self.output
  end

  function cls:updateGradInput(input, gradOutput)
    pointwise.checkGradOutput(self, input, gradOutput, deviceOk)
    if self.inplace then
      -- gradOutput becomes gradInput: it must have the input's type before it is written
      check.sameType(torch.type(self), input, gradOutput)
      backward(self, gradOutput, input, gradOutput, input, params(self))  -- input holds the output
      self.gradInput:set(gradOutput)
    else
      self.gradInput:resizeAs(input)
      backward(self, self.gradInput, input, gradOutput, self.output, params(self))
    end
    return self.gradInput
  end
end

return pointwise
