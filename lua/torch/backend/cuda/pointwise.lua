-- CUDA fill, copy and pointwise ops (argument forms of core.lua).
local C = require 'torch.backend.cuda.core'
local torch, check, isTensor, call, dtypes, def = C.torch, C.check, C.isTensor, C.call, C.dtypes, C.def
local floatOnly, divisor, result, sized = C.floatOnly, C.divisor, C.result, C.sized

-- fill, copy

def('fill', { 'T n', function(t, v) call('fill', t, v) return t end })
def('zero', { 'T', function(t) call('fill', t, 0) return t end })

def('copy', { 'T T', function(t, src)
  check.sameElements('copy', t, src)
  call(src._device and 'copy' or 'upload', t, src)
  return t
end })

------------------------------------------------------------------------------------------------
-- pointwise

local anyType = { abs = true, sign = true, neg = true }
for _, name in ipairs {
  'exp', 'log', 'log1p', 'sqrt', 'rsqrt', 'sin', 'cos', 'tan', 'asin', 'acos', 'atan', 'sinh', 'cosh',
  'tanh', 'sigmoid', 'floor', 'ceil', 'round', 'trunc', 'frac', 'cinv', 'abs', 'sign', 'neg',
} do
  def(name, { 'R S', function(r, s)
    if not anyType[name] then floatOnly(name, s) end
    r = result(name, r, s)
    call('unary', name, r, s)
    return r
  end })
end

-- r = s (op) value and r = s (op) t (elementwise), for the Python binary ops
local divides = { div = true, fmod = true, remainder = true }
local function byValue(name, op)
  return { 'R S n', function(r, s, v)
    if divides[op] then divisor(name, s, v) end
    r = result(name, r, s)
    call('binary', op, r, s, v)
    return r
  end }
end
local function byTensor(name, op)
  return { 'R S T', function(r, s, t)
    if op == 'atan2' then floatOnly(name, s) end
    r = result(name, r, s, t)
    call('binary', op, r, s, t)
    return r
  end }
end
for name, op in pairs { mul = 'mul', div = 'div', fmod = 'fmod', mod = 'fmod', remainder = 'remainder' } do
  def(name, byValue(name, op))
end
for name, op in pairs { cmul = 'mul', cdiv = 'div', cpow = 'pow', cfmod = 'fmod', cmod = 'fmod',
                        cremainder = 'remainder', atan2 = 'atan2' } do
  def(name, byTensor(name, op))
end
def('cmax', byTensor('cmax', 'max'), byValue('cmax', 'max'))
def('cmin', byTensor('cmin', 'min'), byValue('cmin', 'min'))
def('pow', byValue('pow', 'pow'), { 'R n S', function(r, v, s)   -- value ^ s
  r = result('pow', r, s)
  call('binary', 'tpow', r, s, v)
  return r
end })

-- add: r = s + value, r = s + value * t; csub subtracts
for name, sign in pairs { add = 1, csub = -1 } do
  def(name,
    { 'R S n', function(r, s, v)
      r = result(name, r, s)
      call('add', r, s, sign * v, nil)
      return r
    end },
    { 'R S n=1 T', function(r, s, v, t)
      r = result(name, r, s, t)
      call('add', r, s, sign * v, t)
      return r
    end })
end

for _, name in ipairs { 'addcmul', 'addcdiv' } do
  def(name, { 'R S n=1 T T', function(r, s, v, t1, t2)
    check.sameType(name, t1, t2)
    check.sameElements(name, t1, t2)
    r = result(name, r, s, t1)
    call(name, r, s, v, t1, t2)
    return r
  end })
end

def('clamp', { 'R S n n', function(r, s, lo, hi)
  r = result('clamp', r, s)
  call('clamp', r, s, lo, hi)
  return r
end })

def('lerp', { 'R S T n', function(r, s, t, w)
  floatOnly('lerp', s)
  r = result('lerp', r, s, t)
  call('lerp', r, s, t, w)
  return r
end })

-- comparisons: a CudaByteTensor of 0/1 (or a result of the operand type)
for _, name in ipairs { 'lt', 'le', 'gt', 'ge', 'eq', 'ne' } do
  local function compare(r, s, y)
    if r ~= nil and r._dt ~= dtypes.Byte and r._dt ~= s._dt then
      check.error(('%s: the result must be a torch.CudaByteTensor or a %s, got %s'):format(
        name, torch.typename(s), torch.typename(r)))
    end
    if isTensor(y) then
      check.sameType(name, s, y)
      check.sameElements(name, s, y)
    end
    r = (r or torch.CudaByteTensor()):resizeAs(s)
    call('binary', name, r, s, y)
    return r
  end
  def(name, { 'r S n', compare }, { 'r S T', compare })
end
