-- The CPU op table's nn ops that run numpy's loops or BLAS: threshold(output, input, th, val)
-- (output = input where input > th, else val) and threshold_backward(gradInput, input,
-- gradOutput, th) (gradOutput where input > th, else 0), for nn.Threshold and nn.ReLU; nn.Linear's
-- batch products. Operands are checked by the modules; output may be input and gradInput
-- gradOutput (in place). backend/cuda/nn.lua has the CUDA ones; nn's other CPU kernels
-- register from backend/cpu/nn_conv.lua, nn_pool.lua, nn_batchnorm.lua and nn/util (loss, targets, pointwise).
local ffi = require 'ffi'
local backend = require 'torch.backend'
local apply = require 'torch.backend.cpu.apply'
local ufunc = require 'torch.backend.cpu.ufunc'
local blas = require 'torch.backend.cpu.blas'

local keepAbove = apply.kernel(2, '$1 = $2 > v1 and $2 or v2')
local gateAbove = apply.kernel(3, '$1 = $2 > v1 and $3 or 0')

-- Zero-threshold rectifiers on the bit patterns of contiguous Float / Double data, read as
-- integers of the same width, with numpy's SIMD integer loops: an IEEE float is > 0 exactly when
-- its bits as a signed integer are > 0 (-0 reads negative), and max(bits, 0) is the bits of
-- max(x, 0). A NaN counts as positive unless its sign bit is set. numpy's min/max loops are
-- vectorized for two arrays only (not with a scalar), so a block of zeros is kept per type,
-- beside a mask buffer. The passes go block by block (BLOCK elements): a block's intermediate
-- results are still in the core's cache for its next pass, and the zeros need only be a block
-- long. Each returns false (nothing done) where it does not apply.
local BLOCK = 8192
local intOf = { Float = { char = 'i', ctype = 'int32_t', shift = 31 },
                Double = { char = 'q', ctype = 'int64_t', shift = 63 } }

-- numpy's integer loops and buffers for element type dt, or false
local intLoops = setmetatable({}, { __index = function(cache, dt)
  local it, l = intOf[dt.name], false
  if it then
    local c = it.char
    l = { max = ufunc.loop('maximum', c .. c .. '->' .. c), neg = ufunc.loop('negative', c .. '->' .. c),
          shift = ufunc.loop('right_shift', c .. c .. '->' .. c),
          band = ufunc.loop('bitwise_and', c .. c .. '->' .. c),
          zeros = ffi.new(it.ctype .. '[?]', BLOCK), bits = ffi.new(it.ctype .. '[?]', BLOCK),
          shiftBy = ffi.new(it.ctype .. '[1]', it.shift) }
    if not (l.max and l.neg and l.shift and l.band) then l = false end
  end
  cache[dt] = l
  return l
end })

-- The loops for t when every tensor given is contiguous and of t's type; else nil.
local function loopsFor(t, a, b)
  local l = intLoops[t._dt]
  if not l or not apply.isContiguous(t) then return nil end
  if a._dt ~= t._dt or not apply.isContiguous(a) then return nil end
  if b and (b._dt ~= t._dt or not apply.isContiguous(b)) then return nil end
  return l
end

-- output = max(input, 0), as max(input's bits, 0).
local function rectify(output, input)
  local l = loopsFor(input, output)
  if not l then return false end
  local n, size = apply.numel(input), input._dt.size
  if n == 0 then return true end
  local x, y = apply.ptr(input), apply.ptr(output)
  for i = 0, n - 1, BLOCK do
    ufunc.binary(l.max, math.min(BLOCK, n - i), x + i, size, l.zeros, size, y + i, size)
  end
  return true
end

-- gradInput = gradOutput where input > 0, else 0: gradOutput's bits and a mask of all ones
-- where max(bits, 0) > 0, i.e. where -max(bits, 0) has its sign bit (shifted across).
local function rectifyBackward(gradInput, input, gradOutput)
  local l = loopsFor(input, gradInput, gradOutput)
  if not l then return false end
  local n, size = apply.numel(input), input._dt.size
  if n == 0 then return true end
  local x, go, gi, bits = apply.ptr(input), apply.ptr(gradOutput), apply.ptr(gradInput), l.bits
  for i = 0, n - 1, BLOCK do
    local k = math.min(BLOCK, n - i)
    ufunc.binary(l.max, k, x + i, size, l.zeros, size, bits, size)
    ufunc.unary(l.neg, k, bits, size, bits, size)
    ufunc.binary(l.shift, k, bits, size, l.shiftBy, 0, bits, size)
    ufunc.binary(l.band, k, go + i, size, bits, size, gi + i, size)
  end
  return true
end

local cpu = backend.cpu

-- v as an element of type dt (the pointwise ops take numbers so cast)
local elements = setmetatable({}, { __index = function(cache, dt)
  local b = ffi.new(dt.ctype .. '[1]')
  cache[dt] = b
  return b
end })
local function asElement(dt, v)
  local b = elements[dt]
  b[0] = v
  return tonumber(b[0])
end

-- max(x, th) when val == th (ReLU): one vectorized pass (on the bits when both are 0)
local function threshold(output, input, th, val)
  if val ~= th then return keepAbove(output, input, th, val) end
  if th ~= 0 or not rectify(output, input) then cpu.binary('max', output, input, asElement(input._dt, th)) end
end

-- For th ~= 0 the bit-pattern passes run on input - th (a float difference has the sign of the
-- exact one: x > th exactly when x - th > 0) where numpy's loops apply; otherwise one branching
-- loop, far slower on data of either sign.
local function thresholdBackward(gradInput, input, gradOutput, th)
  if th == 0 and rectifyBackward(gradInput, input, gradOutput) then return end
  if th ~= 0 and loopsFor(input, gradInput, gradOutput) then
    local shifted = backend.scratch(input)
    cpu.add(shifted, input, asElement(input._dt, -th), nil)
    if rectifyBackward(gradInput, shifted, gradOutput) then return end
  end
  gateAbove(gradInput, input, gradOutput, th)
end

-- nn.Linear on a batch: input (n x I), weight (O x I), out (n x O), bias (O) and ones (n)
-- contiguous Float or Double of one type, apart from the result. BLAS is column-major: each
-- row-major matrix is its transpose.
local ptr = apply.ptr

local function linearForward(out, input, weight, bias, ones)
  local n, O, I = input._sz[1], weight._sz[1], weight._sz[2]
  blas.gemm(out._dt, true, false, O, n, I, 1, ptr(weight), I, ptr(input), I, 0, ptr(out), O)
  if bias then blas.ger(out._dt, O, n, 1, ptr(bias), 1, ptr(ones), 1, ptr(out), O) end
end

-- gradInput (n x I) = gradOutput (n x O) . weight
local function linearGradInput(gradInput, gradOutput, weight)
  local n, O, I = gradOutput._sz[1], weight._sz[1], weight._sz[2]
  blas.gemm(gradInput._dt, false, false, I, n, O, 1, ptr(weight), I, ptr(gradOutput), O, 0, ptr(gradInput), I)
end

-- gradWeight += scale * gradOutput^T . input; gradBias (or nil) += scale * gradOutput^T . ones
local function linearAccGrad(gradWeight, gradBias, input, gradOutput, ones, scale)
  local n, O, I = input._sz[1], gradWeight._sz[1], gradWeight._sz[2]
  local dt = gradWeight._dt
  blas.gemm(dt, false, true, I, O, n, scale, ptr(input), I, ptr(gradOutput), O, 1, ptr(gradWeight), I)
  if gradBias then blas.gemv(dt, false, O, n, scale, ptr(gradOutput), O, ptr(ones), 1, 1, ptr(gradBias), 1) end
end

backend.register('cpu', { threshold = threshold, threshold_backward = thresholdBackward,
  linear_forward = linearForward, linear_grad_input = linearGradInput, linear_acc_grad = linearAccGrad })
