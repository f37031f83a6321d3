-- Elementwise layers: updateOutput / updateGradInput built from kernel bodies or tensor ops,
-- in place when the module's `inplace` field is set (output then shares input's storage, and
-- gradInput shares gradOutput's).
--   forward:  '$1 = f($2)'           $1 output, $2 input (a CPU loop); or
--   forwardOp(m, output, input, ...) tensor ops, for every device (m: the module)
--   backward: '$1 = g($2, $3, $4)'   $1 gradInput, $2 input, $3 gradOutput, $4 output; or
--   backwardOp(m, gradInput, input, gradOutput, output, ...)
--   params(self) gives the scalars (v1..v3 in the bodies, ... above).
-- CUDA tensors use the tensor-op forms, or deviceForward / deviceBackward (same arguments)
-- where the CPU form is a loop; without either the module is CPU only.
local ffi = require 'ffi'
local check = require 'torch.check'
local apply = require 'torch.backend.cpu.apply'
local ufunc = require 'torch.backend.cpu.ufunc'

local pointwise = {}

local function none() end

-- The errors for an input that is not a CPU tensor (the loops here run on CPU memory), or a
-- gradOutput whose size differs.
function pointwise.checkInput(module, input, deviceOk)
  if not torch.isTensor(input) then
    check.error(('%s: input must be a tensor, got %s'):format(torch.type(module), torch.type(input)))
  end
  if input._device and not deviceOk then
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
  local byteType = x._device and 'torch.CudaByteTensor' or 'torch.ByteTensor'
  if torch.type(m._above) ~= byteType then
    m._above, m._below = torch.getmetatable(byteType).new(), torch.getmetatable(byteType).new()
  end
  if torch.type(m._mask) ~= torch.type(x) then m._mask = x.new() end
  torch.gt(m._above, x, lo)
  if hi then m._above:cmul(torch.lt(m._below, x, hi)) end
  return m._mask:resize(x:size()):copy(m._above)
end

-- Zero-threshold rectifiers on the bit patterns of contiguous Float / Double data, read as
-- integers of the same width, with numpy's SIMD integer loops: an IEEE float is > 0 exactly when
-- its bits as a signed integer are > 0 (-0 reads negative), and max(bits, 0) is the bits of
-- max(x, 0). A NaN counts as positive unless its sign bit is set. numpy's min/max loops are
-- vectorized for two arrays only (not with a scalar), so the module keeps a block of zeros,
-- m._zeros, and a mask buffer, m._bits. The passes go block by block (BLOCK elements): a
-- block's intermediate results are still in the core's cache for its next pass, and the zeros
-- need only be a block long. Each returns false (nothing done) where it does not apply.
local BLOCK = 8192
local intOf = { Float = { char = 'i', tensor = 'IntTensor' }, Double = { char = 'q', tensor = 'LongTensor' } }
local shifts = { i = ffi.new('int32_t[1]', 31), q = ffi.new('int64_t[1]', 63) }

local function intLoops(t, tensors)
  local it = not t._device and intOf[t._dt.name]
  if not it or not apply.isContiguous(t) then return nil end
  for _, x in ipairs(tensors) do
    if x._dt ~= t._dt or not apply.isContiguous(x) then return nil end
  end
  local c = it.char
  local l = { max = ufunc.loop('maximum', c .. c .. '->' .. c), neg = ufunc.loop('negative', c .. '->' .. c),
              shift = ufunc.loop('right_shift', c .. c .. '->' .. c),
              band = ufunc.loop('bitwise_and', c .. c .. '->' .. c) }
  if not (l.max and l.neg and l.shift and l.band) then return nil end
  l.tensor, l.bits = it.tensor, shifts[c]
  return l
end

-- An integer buffer m[field] of l.tensor's type with n elements at least; zeroed when `zeroed`.
local function intBuffer(m, field, l, n, zeroed)
  local b = m[field]
  if torch.type(b) ~= 'torch.' .. l.tensor then b = torch[l.tensor](); m[field] = b end
  if b:nElement() < n then
    b:resize(n)
    if zeroed then b:zero() end
  end
  return apply.ptr(b)
end

-- output = max(input, 0), as max(input's bits, 0).
function pointwise.rectify(m, output, input)
  local l = intLoops(input, { output })
  if not l then return false end
  local n, size = apply.numel(input), input._dt.size
  if n == 0 then return true end
  local zeros = intBuffer(m, '_zeros', l, math.min(n, BLOCK), true)
  local x, y = apply.ptr(input), apply.ptr(output)
  for i = 0, n - 1, BLOCK do
    ufunc.binary(l.max, math.min(BLOCK, n - i), x + i, size, zeros, size, y + i, size)
  end
  return true
end

-- gradInput = gradOutput where input > 0, else 0: gradOutput's bits and a mask of all ones
-- where max(bits, 0) > 0, i.e. where -max(bits, 0) has its sign bit (shifted across).
function pointwise.rectifyBackward(m, gradInput, input, gradOutput)
  local l = intLoops(input, { gradInput, gradOutput })
  if not l then return false end
  local n, size = apply.numel(input), input._dt.size
  if n == 0 then return true end
  local zeros = intBuffer(m, '_zeros', l, math.min(n, BLOCK), true)
  local bits = intBuffer(m, '_bits', l, math.min(n, BLOCK))
  local x, go, gi = apply.ptr(input), apply.ptr(gradOutput), apply.ptr(gradInput)
  for i = 0, n - 1, BLOCK do
    local k = math.min(BLOCK, n - i)
    ufunc.binary(l.max, k, x + i, size, zeros, size, bits, size)
    ufunc.unary(l.neg, k, bits, size, bits, size)
    ufunc.binary(l.shift, k, bits, size, l.bits, 0, bits, size)
    ufunc.binary(l.band, k, go + i, size, bits, size, gi + i, size)
  end
  return true
end

function pointwise.define(cls, spec)
  local params = spec.params or none
  local forward, backward = spec.forwardOp, spec.backwardOp
  if not forward then
    local loop = apply.kernel(2, spec.forward)
    forward = function(_, ...) loop(...) end
  end
  if not backward then
    local loop = apply.kernel(4, spec.backward)
    backward = function(_, ...) loop(...) end
  end
  local deviceForward = spec.forwardOp or spec.deviceForward
  local deviceBackward = spec.backwardOp or spec.deviceBackward
  local onDevice = deviceForward ~= nil and deviceBackward ~= nil

  function cls:updateOutput(input)
    pointwise.checkInput(self, input, onDevice)
    local run = input._device and deviceForward or forward
    if self.inplace then
      run(self, input, input, params(self))
      self.output:set(input)
    else
      self.output:resizeAs(input)
      run(self, self.output, input, params(self))
    end
    return self.output
  end

  function cls:updateGradInput(input, gradOutput)
    pointwise.checkGradOutput(self, input, gradOutput, onDevice)
    local run = input._device and deviceBackward or backward
    if self.inplace then
      -- gradOutput becomes gradInput: it must have the input's type before it is written
      check.sameType(torch.type(self), input, gradOutput)
      run(self, gradOutput, input, gradOutput, input, params(self))  -- input holds the output
      self.gradInput:set(gradOutput)
    else
      self.gradInput:resizeAs(input)
      run(self, self.gradInput, input, gradOutput, self.output, params(self))
    end
    return self.gradInput
  end
end

return pointwise
