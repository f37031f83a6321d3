-- Elementwise math with torch7's semantics (TensorMath.lua, THTensorMath.c), the front end for
-- every device: res:op([src,] ...) writes into self; torch.op([res,] src, ...) writes into res or
-- a new tensor; results are resized as torch7 does, and every argument is checked before one
-- call of the tensor's op table (backend.of(r).unary, binary, add...) writes anything. The CPU
-- kernels are backend/cpu/pointwise.lua's.
-- Returns the helpers that compare.lua shares.
local ffi = require 'ffi'
local torch = require 'torch.env'
local check = require 'torch.core.check'
local backend = require 'torch.backend'

local isTensor = torch.isTensor
local P = {}

------------------------------------------------------------------------------------------------
-- argument forms and checks

local FLOATS = { Float = true, Double = true }
local INTEGERS = { Byte = true, Char = true, Short = true, Int = true, Long = true }
local ALL = { Float = true, Double = true, Byte = true, Char = true, Short = true, Int = true, Long = true }
local ABS = { Int = true, Long = true, Float = true, Double = true }
-- what each set holds, for CPU and for CUDA tensors (whose Half arithmetic the array module has)
local typesText = {
  [FLOATS] = { 'torch.FloatTensor and torch.DoubleTensor only',
               'torch.CudaTensor, torch.CudaDoubleTensor and torch.CudaHalfTensor only' },
  [INTEGERS] = { 'the integer types only (Byte, Char, Short, Int and Long)',
                 'the integer types only (CudaByte, CudaChar, CudaShort, CudaInt and CudaLong)' },
  [ALL] = { 'every tensor type but torch.HalfTensor', 'every CUDA tensor type' },
  [ABS] = { 'torch.IntTensor, torch.LongTensor, torch.FloatTensor and torch.DoubleTensor only',
            'torch.CudaIntTensor, torch.CudaLongTensor, torch.CudaTensor, torch.CudaDoubleTensor and '
              .. 'torch.CudaHalfTensor only' },
}
P.INTEGERS, P.ALL = INTEGERS, ALL

-- Checks that op (name) supports t's type, one of the sets above (a CUDA type by its host type,
-- Half as Float).
function P.supports(name, types, t)
  local dt = t._dt
  local host = dt.host
  if host then
    if types[host.half and 'Float' or host.name] then return end
  elseif types[dt.name] then return end
  local text = typesText[types]
  check.error(('%s: %s is not supported; torch7 has %s for %s'):format(
    name, torch.typename(t), name, host and text[2] or text[1]))
end
local supports = P.supports

-- One-element buffers by element type id (CUDA ones made when first met; none for Half, which
-- the CPU never computes in and the array module casts to itself).
local scalars = {}
local function scalarOf(dt)
  local b = not dt.half and ffi.new(dt.ctype .. '[1]')
  scalars[dt.id] = b
  return b
end

-- v as an element of type dt holds it, as torch7 casts its `real` arguments.
local function toReal(dt, v)
  local b = scalars[dt.id]
  if b == nil then b = scalarOf(dt) end
  if not b then return v end
  b[0] = v
  return dt.int64 and tonumber(b[0]) or b[0]
end
P.toReal = toReal

-- The result for source src: res (checked to be of src's type) or a new tensor of that type.
function P.result(name, res, src)
  if res == nil then return torch._makeTensor(getmetatable(src)) end
  check.sameType(name, src, res)
  return res
end
local result = P.result

-- Another tensor operand of src's type and element count.
function P.partner(name, src, t)
  check.sameType(name, src, t)
  check.sameElements(name, src, t)
end
local partner = P.partner

local function invalid(name, usage, ...)
  local got = {}
  for i = 1, select('#', ...) do got[i] = torch.type((select(i, ...))) end
  while got[#got] == 'nil' do got[#got] = nil end
  check.error(('%s: invalid arguments (%s); expected %s'):format(name, table.concat(got, ', '), usage))
end

-- Installs res:name(...) and torch.name(...) from core(res, ...), which returns the result, or
-- nil when its arguments are none of the op's forms (having written nothing). The method's
-- source may be left out (self is the source) unless methodAsFunction (then the method takes
-- torch.name's forms); torch.name's result may be left out (a new tensor). numberFn(...)
-- answers torch.name on numbers only.
function P.define(name, core, usage, numberFn, methodAsFunction)
  local function fn(a, b, c, d, e)
    if numberFn and type(a) == 'number' and not isTensor(b) and not isTensor(c) then return numberFn(a, b, c) end
    local r = isTensor(a) and core(a, b, c, d, e) or (e == nil and core(nil, a, b, c, d))
    if not r then invalid(name, usage, a, b, c, d, e) end
    return r
  end
  torch[name] = fn
  torch._method(name, methodAsFunction and fn or function(self, a, b, c, d)
    local r = isTensor(self) and (core(self, a, b, c, d) or (d == nil and core(self, self, a, b, c)))
    if not r then invalid(name, usage, self, a, b, c, d) end
    return r
  end)
end

------------------------------------------------------------------------------------------------
-- one source tensor: r = f(a)

local libm = torch._libm
local function sigmoid(x) return 1 / (1 + math.exp(-x)) end
local function frac(x) return x - libm.trunc(x) end

local unaryOps = {
  -- name      types     number form
  { 'exp',     FLOATS,   math.exp },
  { 'log',     FLOATS,   math.log },
  { 'log1p',   FLOATS,   libm.log1p },
  { 'sqrt',    FLOATS,   math.sqrt },
  { 'rsqrt',   FLOATS,   function(x) return 1 / math.sqrt(x) end },
  { 'sigmoid', FLOATS,   sigmoid },
  { 'sin',     FLOATS,   math.sin },
  { 'cos',     FLOATS,   math.cos },
  { 'tan',     FLOATS,   math.tan },
  { 'asin',    FLOATS,   math.asin },
  { 'acos',    FLOATS,   math.acos },
  { 'atan',    FLOATS,   math.atan },
  { 'sinh',    FLOATS,   math.sinh },
  { 'cosh',    FLOATS,   math.cosh },
  { 'tanh',    FLOATS,   math.tanh },
  { 'floor',   FLOATS,   math.floor },
  { 'ceil',    FLOATS,   math.ceil },
  { 'trunc',   FLOATS,   libm.trunc },
  { 'round',   FLOATS,   libm.round },   -- C round(): halves away from zero
  { 'frac',    FLOATS,   frac },
  { 'neg',     FLOATS },
  { 'cinv',    FLOATS },
  { 'abs',     ABS,      math.abs },
  { 'sign',    ALL },   -- torch7's: 0 for 0 and nan
}

for _, spec in ipairs(unaryOps) do
  local name, types, numberFn = spec[1], spec[2], spec[3]
  P.define(name, function(r, a, extra)
    if not isTensor(a) or extra ~= nil then return nil end
    supports(name, types, a)
    r = result(name, r, a):resizeAs(a)
    backend.of(r).unary(name, r, a)
    return r
  end, '[res,] tensor', numberFn and function(x)
    check.number(name, x)
    return numberFn(x)
  end)
end

------------------------------------------------------------------------------------------------
-- a source tensor and a number, r = f(a, v); two source tensors, r = f(a, b)

-- Integer types have no division by zero (C traps): refused before anything is written.
local function divisor(name, dt, v)
  if v == 0 and dt.integer then
    check.error(('%s: integer division by zero (%s)'):format(name, dt.tensor))
  end
end

-- Defines ops of the form [res,] tensor, value from specs { name, types, binary op, check,
-- { binary op, value map } for Float and Double }.
function P.scalarOps(specs)
  for _, spec in ipairs(specs) do
    local name, types, op, validate, floating = spec[1], spec[2], spec[3], spec[4], spec[5]
    P.define(name, function(r, a, v, extra)
      if not isTensor(a) or type(v) ~= 'number' or extra ~= nil then return nil end
      supports(name, types, a)
      local dt, o = a._dt, op
      if floating and not dt.integer then o, v = floating[1], floating[2](v) end
      v = toReal(dt, v)
      if validate then validate(name, dt, v) end
      r = result(name, r, a):resizeAs(a)
      backend.of(r).binary(o, r, a, v)
      return r
    end, '[res,] tensor, value')
  end
end

-- Defines ops of the form [res,] tensor1, tensor2 from specs { name, types, binary op, number form }.
function P.binaryOps(specs)
  for _, spec in ipairs(specs) do
    local name, types, op = spec[1], spec[2], spec[3]
    P.define(name, function(r, a, b, extra)
      if not isTensor(a) or not isTensor(b) or extra ~= nil then return nil end
      supports(name, types, a)
      partner(name, a, b)
      r = result(name, r, a):resizeAs(a)
      backend.of(r).binary(op, r, a, b)
      return r
    end, '[res,] tensor1, tensor2', spec[4])
  end
end

P.scalarOps {
  { 'mul',        ALL,      'mul' },
  { 'div',        ALL,      'div',        divisor },
  { 'fmod',       ALL,      'fmod',       divisor },
  { 'mod',        ALL,      'fmod',       divisor },   -- torch7's old alias
  { 'remainder',  ALL,      'remainder',  divisor },
}

P.binaryOps {
  { 'cmul',        ALL,      'mul' },
  { 'cdiv',        ALL,      'div' },
  { 'cpow',        ALL,      'pow' },
  { 'cfmod',       ALL,      'fmod' },
  { 'cmod',        ALL,      'fmod' },   -- torch7's old alias
  { 'cremainder',  ALL,      'remainder' },
  { 'atan2',       FLOATS,   'atan2', function(y, x)
      check.number('atan2', x)
      return math.atan2(y, x)
    end },
}

------------------------------------------------------------------------------------------------
-- add and csub: r = a + v, r = a + b, r = a + v * b (csub subtracts)

local function addCore(name, sign)
  return function(r, a, b, c, extra)
    if not isTensor(a) or extra ~= nil then return nil end
    local v, t
    if type(b) == 'number' and c == nil then v = b
    elseif isTensor(b) and c == nil then v, t = 1, b
    elseif type(b) == 'number' and isTensor(c) then v, t = b, c
    else return nil end
    supports(name, ALL, a)
    if t then partner(name, a, t) end
    v = toReal(a._dt, sign * v)
    r = result(name, r, a):resizeAs(a)
    backend.of(r).add(r, a, v, t)
    return r
  end
end
P.define('add', addCore('add', 1), '[res,] tensor, value | [res,] tensor1, [value,] tensor2')
P.define('csub', addCore('csub', -1), '[res,] tensor, value | [res,] tensor1, [value,] tensor2')

------------------------------------------------------------------------------------------------
-- clamp(min, max), lerp(b, weight), addcmul / addcdiv([value,] t1, t2)

P.define('clamp', function(r, a, lo, hi, extra)
  if not isTensor(a) or type(lo) ~= 'number' or type(hi) ~= 'number' or extra ~= nil then return nil end
  supports('clamp', ALL, a)
  local dt = a._dt
  lo, hi = toReal(dt, lo), toReal(dt, hi)
  r = result('clamp', r, a):resizeAs(a)
  backend.of(r).clamp(r, a, lo, hi)
  return r
end, '[res,] tensor, min_value, max_value')

P.define('lerp', function(r, a, b, w, extra)
  if not isTensor(a) or not isTensor(b) or type(w) ~= 'number' or extra ~= nil then return nil end
  supports('lerp', FLOATS, a)
  partner('lerp', a, b)
  w = toReal(a._dt, w)
  r = result('lerp', r, a):resizeAs(a)
  backend.of(r).lerp(r, a, b, w)
  return r
end, '[res,] a, b, weight', function(a, b, w)
  check.number('lerp', b)
  check.number('lerp', w)
  return a + w * (b - a)
end)

for _, name in ipairs { 'addcmul', 'addcdiv' } do
  P.define(name, function(r, t, v, t1, t2, extra)
    if type(v) ~= 'number' then v, t1, t2, extra = 1, v, t1, t2 end
    if not isTensor(t) or not isTensor(t1) or not isTensor(t2) or extra ~= nil then return nil end
    supports(name, ALL, t)
    partner(name, t, t1)
    partner(name, t, t2)
    v = toReal(t._dt, v)
    r = result(name, r, t):resizeAs(t)
    backend.of(r)[name](r, t, v, t1, t2)
    return r
  end, '[res,] tensor, [value,] tensor1, tensor2')
end

------------------------------------------------------------------------------------------------
-- torch.elementwise(program, tensors, scalars): a luabridge extension (not torch7's) that runs
-- a program of elementwise assignments in one threaded, blocked pass where its tensors allow,
--   torch.elementwise('m = b1*m + c1*g; x = x - s*m', { m = m, g = g, x = x }, { b1 = .9, ... })
-- Names are tensors (the assigned ones are written) and numbers (cast to the tensors' type);
-- + - * / and sqrt, abs, exp, log, maximum, minimum; statements run in order, element by
-- element, so each reads what the ones before it wrote. It returns true when it ran, false when
-- the tensors do not qualify (not CPU, not all contiguous Float or Double of one type and size,
-- below the size where it pays, partly overlapping) and nothing was written: the caller then
-- runs the same steps as tensor ops (optim's updates do).

function torch.elementwise(program, tensors, scalars)
  if type(program) ~= 'string' or type(tensors) ~= 'table' or (scalars ~= nil and type(scalars) ~= 'table') then
    check.error('torch.elementwise: expected (program string, table of tensors[, table of numbers])')
  end
  local first
  for name, t in pairs(tensors) do
    if type(name) ~= 'string' or not isTensor(t) then
      check.error(('torch.elementwise: %s is not a tensor named by a string'):format(tostring(name)))
    end
    first = first or t
  end
  for name, v in pairs(scalars or {}) do
    if type(name) ~= 'string' or type(v) ~= 'number' then
      check.error(('torch.elementwise: %s is not a number named by a string'):format(tostring(name)))
    end
  end
  if not first then return false end
  return backend.of(first).elementwise(program, tensors, scalars or {})
end

------------------------------------------------------------------------------------------------
-- pow: r = a ^ v, or (tpow) r = v ^ a

P.define('pow', function(r, a, b, extra)
  if extra ~= nil then return nil end
  local t, v = a, b
  if type(a) == 'number' then t, v = b, a end
  if not isTensor(t) or type(v) ~= 'number' then return nil end
  supports('pow', FLOATS, t)
  v = toReal(t._dt, v)
  r = result('pow', r, t):resizeAs(t)
  backend.of(r).binary(t == b and 'tpow' or 'pow', r, t, v)
  return r
end, '[res,] tensor, value | [res,] value, tensor', function(x, y)
  check.number('pow', y)
  return x ^ y
end)

return P
