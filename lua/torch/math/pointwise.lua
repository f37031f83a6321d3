-- Elementwise math with torch7's semantics (TensorMath.lua, THTensorMath.c). The method
-- res:op([src,] ...) writes into self; torch.op([res,] src, ...) writes into res or a new tensor;
-- results are resized as torch7 does, and every argument is checked before anything is written.
-- Float and Double operands run numpy's SIMD loops (backend/cpu/ufunc.lua) when contiguous and
-- large enough (P.numpyFrom); everything else runs LuaJIT kernels (apply.kernel).
-- Returns the helpers that compare.lua shares.
local ffi = require 'ffi'
local torch = require 'torch.env'
local dtype = require 'torch.dtype'
local check = require 'torch.check'
local apply = require 'torch.backend.cpu.apply'
local ufunc = require 'torch.backend.cpu.ufunc'
local blas = require 'torch.backend.cpu.blas'

local isTensor, numel, isContiguous = torch.isTensor, apply.numel, apply.isContiguous
local P = {}

------------------------------------------------------------------------------------------------
-- where numpy's loops take over

-- Element counts from which an op runs numpy's loop on contiguous Float / Double operands
-- rather than the LuaJIT kernel. Measured with `python bench/tensor_ops.py --thresholds` (AMD
-- EPYC Zen 5 with AVX-512, numpy 2.4): a loop call costs a few ns, so numpy wins from 4 to 16
-- elements and by 4x (+, *) to 50x (tanh) at 1024; ops switch at 16 but for these exceptions.
local numpyFromAll = 16
P.numpyFrom = {
  floor   = { Float = 32,  Double = 16 },
  rsqrt   = { Float = 16,  Double = 256 },   -- two loops
  sigmoid = { Float = 64,  Double = 512 },   -- four loops
  square  = { Float = 512, Double = 256 },   -- x * x is as fast in Lua
}

-- An op key, with its thresholds (the default unless an exception above).
local function numpyKey(key)
  P.numpyFrom[key] = P.numpyFrom[key] or { Float = numpyFromAll, Double = numpyFromAll }
  return key
end

local intptr = ffi.typeof('intptr_t')
local typeChar = { Float = 'f', Double = 'd' }

-- The byte address of t's first element, as a number.
local function address(t) return tonumber(ffi.cast(intptr, t._st._ptr)) + t._off * t._dt.size end
local function data(t) return t._st._ptr + t._off end

-- The address of r's elements when numpy's loop may write the n elements of r for op `key` on
-- sources of type dt: contiguous, aligned, and at least the op's threshold; else nil.
local function numpyTarget(key, dt, r, n)
  local from = P.numpyFrom[key]
  local least = from and from[dt.name]
  if not least or n < least or n == 0 or not isContiguous(r) then return nil end
  local p = address(r)
  if p % r._dt.size ~= 0 then return nil end
  return p
end

-- Whether numpy's loop may read input t (n elements) for result r at address pr: contiguous,
-- aligned, and either r's very elements or apart from them (the loops read ahead in blocks,
-- torch7 element by element).
local function numpySource(t, r, pr, n)
  if not isContiguous(t) then return false end
  local p, s = address(t), t._dt.size
  if p % s ~= 0 then return false end
  return (p == pr and s == r._dt.size) or p + n * s <= pr or pr + n * r._dt.size <= p
end

-- numpy's loop for ufunc `name` with nin inputs of dt (output '?' with boolOut), by dt, cached.
local function numpyLoop(name, nin, boolOut)
  local byType = {}
  return function(dt)
    local l = byType[dt.id]
    if l == nil then
      local c = typeChar[dt.name]
      l = c and ufunc.loop(name, c:rep(nin) .. '->' .. (boolOut and '?' or c)) or false
      byType[dt.id] = l
    end
    return l
  end
end

-- A one-element buffer per element type: casts numbers to the type, and holds numpy's scalar
-- operands (step 0).
local scalars = {}
for _, dt in ipairs(dtype.list) do scalars[dt.id] = ffi.new(dt.ctype .. '[1]') end

-- v as an element of type dt holds it, as torch7 casts its `real` arguments.
local function toReal(dt, v)
  local b = scalars[dt.id]
  b[0] = v
  return dt.int64 and tonumber(b[0]) or b[0]
end
P.toReal = toReal

------------------------------------------------------------------------------------------------
-- LuaJIT kernels

-- C functions that kernel bodies reach as torch._libm.f (Lua's math lacks them).
ffi.cdef [[
double luabridge_trunc(double) asm("trunc");
double luabridge_round(double) asm("round");
double luabridge_log1p(double) asm("log1p");
]]
torch._libm = { trunc = ffi.C.luabridge_trunc, round = ffi.C.luabridge_round, log1p = ffi.C.luabridge_log1p }

-- Element type classes for kernel bodies: F computes in double, I (Byte to Int) in double and
-- stores truncated, L in int64 arithmetic (Long elements read as int64 cdata).
local function classOf(dt) return dt.integer and (dt.int64 and 'L' or 'I') or 'F' end

local runners = {}
local function runner(n, body)
  local key = n .. body
  if not runners[key] then runners[key] = apply.kernel(n, body) end
  return runners[key]
end

-- apply.kernel runners by dtype id for an n-operand op: bodies is one body for every type or
-- { F =, I =, L = } (L falls back on I).
local function kernels(n, bodies)
  local byType = {}
  for _, dt in ipairs(dtype.list) do
    local c = classOf(dt)
    local body = type(bodies) == 'string' and bodies or bodies[c] or (c == 'L' and bodies.I)
    byType[dt.id] = body and runner(n, body) or false
  end
  return byType
end

------------------------------------------------------------------------------------------------
-- runners: kernel or numpy loop, for checked and resized operands

-- No loop runs per call on the way to a kernel or numpy loop: a short loop entered on every
-- call gets hot by itself, fails to make a trace, is blacklisted, and then every trace through
-- it aborts (so chains below are nested closures, not loops).

-- r = f(a). chain: numpy's loops in turn, the first reading a and the rest r in place; a step
-- is a ufunc name or { name, c }, a binary ufunc with the constant c second.
local function map1(key, bodies, chain)
  local run = kernels(2, bodies)
  if not chain then return function(r, a) run[r._dt.id](r, a) end end
  numpyKey(key)
  local steps = {}
  for i, s in ipairs(chain) do
    steps[i] = type(s) == 'table' and { loop = numpyLoop(s[1], 2), c = s[2] } or { loop = numpyLoop(s, 1) }
  end
  local function stepFrom(i)
    local s, after = steps[i], steps[i + 1] and stepFrom(i + 1)
    return function(dt, n, src, out, size)
      if s.c then
        local k = scalars[dt.id]
        k[0] = s.c
        ufunc.binary(s.loop(dt), n, src, size, k, 0, out, size)
      else
        ufunc.unary(s.loop(dt), n, src, size, out, size)
      end
      if after then return after(dt, n, out, out, size) end
    end
  end
  local first = stepFrom(1)
  local available = {}   -- by dtype id: numpy lends every loop of the chain
  local function numpyHas(dt)
    local ok = available[dt.id]
    if ok == nil then
      ok = true
      for _, s in ipairs(steps) do ok = ok and s.loop(dt) ~= false end
      available[dt.id] = ok
    end
    return ok
  end
  return function(r, a)
    local dt = r._dt
    local n = numel(r)
    local pr = numpyTarget(key, dt, r, n)
    if pr and numpySource(a, r, pr, n) and numpyHas(dt) then
      return first(dt, n, data(a), data(r), dt.size)
    end
    run[dt.id](r, a)
  end
end

-- Copies of a value, for the loops (fmax, fmin) that run slowly on a step-0 operand: up to CHUNK
-- of them per element type, refilled as far as needed when the value changes.
local CHUNK = 4096
local function constants()
  local byType = {}
  return function(dt, v, m)
    local c = byType[dt.id]
    if not c then
      c = { buf = ffi.new(dt.ctype .. '[?]', CHUNK), filled = 0 }
      byType[dt.id] = c
    end
    if c.v ~= v then c.v, c.filled = v, 0 end
    if c.filled < m then
      for i = c.filled, m - 1 do c.buf[i] = v end
      c.filled = m
    end
    return c.buf
  end
end

-- In the two runners below the kernels and loops go by the source's type (the result's, but for
-- comparisons into a ByteTensor: numpy's bool output, a byte of 0 or 1, when boolOut).

-- r = f(a, v) for a number v (already of a's type); the kernels see v as v1 (and v2). numpy's
-- ufuncName takes v second at step 0; operand 'first' puts it first, 'array' passes an array of
-- copies (in CHUNK-sized calls; not for nan, which fmax and fmin skip where torch7 keeps it).
local function mapScalar(key, bodies, ufuncName, operand, boolOut)
  local run = kernels(2, bodies)
  local loop = ufuncName and numpyLoop(ufuncName, 2, boolOut)
  local copies = operand == 'array' and constants()
  local function numpyRun(l, dt, n, pa, v, pr, out)
    local size = dt.size
    if copies then
      if n <= CHUNK then return ufunc.binary(l, n, pa, size, copies(dt, v, n), size, pr, out) end
      local buf = copies(dt, v, CHUNK)
      for off = 0, n - 1, CHUNK do
        ufunc.binary(l, math.min(CHUNK, n - off), pa + off, size, buf, size, pr + off, out)
      end
      return
    end
    local k = scalars[dt.id]
    k[0] = v
    if operand == 'first' then return ufunc.binary(l, n, k, 0, pa, size, pr, out) end
    ufunc.binary(l, n, pa, size, k, 0, pr, out)
  end
  if loop then numpyKey(key) end
  return function(r, a, v, v2)
    local dt = a._dt
    if loop and (v == v or not copies) and r._dt == (boolOut and dtype.Byte or dt) then
      local n = numel(r)
      local pr = numpyTarget(key, dt, r, n)
      if pr and numpySource(a, r, pr, n) and loop(dt) then
        return numpyRun(loop(dt), dt, n, data(a), v, data(r), r._dt.size)
      end
    end
    run[dt.id](r, a, v, v2)
  end
end

-- r = f(a, b) for tensors of a's type with r's element count.
local function map2(key, bodies, ufuncName, boolOut)
  local run = kernels(3, bodies)
  local loop = ufuncName and numpyLoop(ufuncName, 2, boolOut)
  if loop then numpyKey(key) end
  return function(r, a, b, v)
    local dt = a._dt
    if loop and r._dt == (boolOut and dtype.Byte or dt) then
      local n = numel(r)
      local pr = numpyTarget(key, dt, r, n)
      if pr and numpySource(a, r, pr, n) and numpySource(b, r, pr, n) and loop(dt) then
        local size = dt.size
        return ufunc.binary(loop(dt), n, data(a), size, data(b), size, data(r), r._dt.size)
      end
    end
    run[dt.id](r, a, b, v)
  end
end
P.mapScalar, P.map2 = mapScalar, map2

------------------------------------------------------------------------------------------------
-- argument forms and checks

local FLOATS = { Float = true, Double = true }
local INTEGERS = { Byte = true, Char = true, Short = true, Int = true, Long = true }
local ALL = { Float = true, Double = true, Byte = true, Char = true, Short = true, Int = true, Long = true }
local ABS = { Int = true, Long = true, Float = true, Double = true }
local typesText = {
  [FLOATS] = 'torch.FloatTensor and torch.DoubleTensor only',
  [INTEGERS] = 'the integer types only (Byte, Char, Short, Int and Long)',
  [ALL] = 'every tensor type but torch.HalfTensor',
  [ABS] = 'torch.IntTensor, torch.LongTensor, torch.FloatTensor and torch.DoubleTensor only',
}
P.INTEGERS, P.ALL = INTEGERS, ALL

-- Checks that op (name) supports t's type (one of the sets above; device types are in none).
function P.supports(name, types, t)
  if not types[t._dt.name] then
    check.error(('%s: %s is not supported; torch7 has %s for %s'):format(
      name, torch.typename(t), name, typesText[types]))
  end
end
local supports = P.supports

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
  -- name      types     kernel body (F)                              numpy chain          number form
  { 'exp',     FLOATS,   'math.exp($2)',                              { 'exp' },           math.exp },
  { 'log',     FLOATS,   'math.log($2)',                              { 'log' },           math.log },
  { 'log1p',   FLOATS,   'torch._libm.log1p($2)',                     { 'log1p' },         libm.log1p },
  { 'sqrt',    FLOATS,   'math.sqrt($2)',                             { 'sqrt' },          math.sqrt },
  { 'rsqrt',   FLOATS,   '1 / math.sqrt($2)',                         { 'sqrt', 'reciprocal' }, function(x) return 1 / math.sqrt(x) end },
  { 'sigmoid', FLOATS,   '1 / (1 + math.exp(-$2))',                   { 'negative', 'exp', { 'add', 1 }, 'reciprocal' }, sigmoid },
  { 'sin',     FLOATS,   'math.sin($2)',                              { 'sin' },           math.sin },
  { 'cos',     FLOATS,   'math.cos($2)',                              { 'cos' },           math.cos },
  { 'tan',     FLOATS,   'math.tan($2)',                              { 'tan' },           math.tan },
  { 'asin',    FLOATS,   'math.asin($2)',                             { 'arcsin' },        math.asin },
  { 'acos',    FLOATS,   'math.acos($2)',                             { 'arccos' },        math.acos },
  { 'atan',    FLOATS,   'math.atan($2)',                             { 'arctan' },        math.atan },
  { 'sinh',    FLOATS,   'math.sinh($2)',                             { 'sinh' },          math.sinh },
  { 'cosh',    FLOATS,   'math.cosh($2)',                             { 'cosh' },          math.cosh },
  { 'tanh',    FLOATS,   'math.tanh($2)',                             { 'tanh' },          math.tanh },
  { 'floor',   FLOATS,   'math.floor($2)',                            { 'floor' },         math.floor },
  { 'ceil',    FLOATS,   'math.ceil($2)',                             { 'ceil' },          math.ceil },
  { 'trunc',   FLOATS,   'torch._libm.trunc($2)',                     { 'trunc' },         libm.trunc },
  -- C round() (halves away from zero), unlike numpy's rint
  { 'round',   FLOATS,   'torch._libm.round($2)',                     nil,                 libm.round },
  { 'frac',    FLOATS,   'local x = $2; $1 = x - torch._libm.trunc(x)', nil,               frac },
  { 'neg',     FLOATS,   '-$2',                                       { 'negative' } },
  { 'cinv',    FLOATS,   '1 / $2',                                    { 'reciprocal' } },
  { 'abs',     ABS,      { F = 'math.abs($2)', I = 'math.abs($2)', L = 'local x = $2; if x < 0 then x = -x end; $1 = x' },
                                                                      { 'absolute' },      math.abs },
  -- torch7's sign: 0 for 0 and nan
  { 'sign',    ALL,      'local x = $2; $1 = x > 0 and 1 or (x < 0 and -1 or 0)' },
}

-- A body for '$1 = ...' given as its right-hand side.
local function assign(body)
  if type(body) == 'table' then
    local r = {}
    for k, v in pairs(body) do r[k] = assign(v) end
    return r
  end
  return body:find('$1', 1, true) and body or '$1 = ' .. body
end

local unaryRun = {}
for _, spec in ipairs(unaryOps) do
  local name, types = spec[1], spec[2]
  local run = map1(name, assign(spec[3]), spec[4])
  unaryRun[name] = run
  P.define(name, function(r, a, extra)
    if not isTensor(a) or extra ~= nil then return nil end
    supports(name, types, a)
    r = result(name, r, a):resizeAs(a)
    run(r, a)
    return r
  end, '[res,] tensor', spec[5] and function(x)
    check.number(name, x)
    return spec[5](x)
  end)
end

------------------------------------------------------------------------------------------------
-- a source tensor and a number, r = f(a, v); two source tensors, r = f(a, b)

-- Integer types have no division by zero (C traps): refused before anything is written.
local function divisor(name, dt, v)
  if v == 0 and dt.integer then
    check.error(('%s: integer division by zero (torch.%sTensor)'):format(name, dt.name))
  end
end

-- The masks giving rshift the unsigned operand torch7 shifts; kernels see them as v2 (with a
-- number) or v1 (with a tensor).
local unsignedMask = { Byte = 0xFF, Char = 0xFF, Short = 0xFFFF, Int = 0xFFFFFFFF }

-- Defines ops of the form [res,] tensor, value from specs
-- { name, types, kernel bodies, numpy ufunc, numpy threshold key, Float/Double value map, check }.
function P.scalarOps(specs)
  for _, spec in ipairs(specs) do
    local name, types, floatValue, validate = spec[1], spec[2], spec[6], spec[7]
    local run = mapScalar(spec[5] or name, assign(spec[3]), spec[4])
    P.define(name, function(r, a, v, extra)
      if not isTensor(a) or type(v) ~= 'number' or extra ~= nil then return nil end
      supports(name, types, a)
      local dt = a._dt
      if floatValue and not dt.integer then v = floatValue(v) end
      v = toReal(dt, v)
      if validate then validate(name, dt, v) end
      r = result(name, r, a):resizeAs(a)
      run(r, a, v, unsignedMask[dt.name])
      return r
    end, '[res,] tensor, value')
  end
end

-- Defines ops of the form [res,] tensor1, tensor2 from specs
-- { name, types, kernel bodies, numpy ufunc, number form }.
function P.binaryOps(specs)
  for _, spec in ipairs(specs) do
    local name, types = spec[1], spec[2]
    local run = map2(name, assign(spec[3]), spec[4])
    P.define(name, function(r, a, b, extra)
      if not isTensor(a) or not isTensor(b) or extra ~= nil then return nil end
      supports(name, types, a)
      partner(name, a, b)
      r = result(name, r, a):resizeAs(a)
      run(r, a, b, unsignedMask[a._dt.name])
      return r
    end, '[res,] tensor1, tensor2', spec[5])
  end
end

local fmodBodies = { F = 'math.fmod($2, v1)', I = 'math.fmod($2, v1)', L = '$2 % v1' }
local remainderBodies = {
  F = 'local x = $2; $1 = x - v1 * math.floor(x / v1)',
  I = '$2 % v1',
  L = 'local m = $2 % v1; if m ~= 0 and (m < 0) ~= (v1 < 0) then m = m + v1 end; $1 = m',
}
-- the same with a tensor divisor
local function withTensor(bodies)
  local r = {}
  for k, body in pairs(bodies) do r[k] = 'local y = $3; ' .. assign(body):gsub('v1', 'y') end
  return r
end

P.scalarOps {
  { 'mul',        ALL,      '$2 * v1',                 'multiply' },
  { 'div',        ALL,      '$2 / v1',                 'divide',    nil,     nil,  divisor },
  { 'fmod',       ALL,      fmodBodies,                'fmod',      nil,     nil,  divisor },
  { 'mod',        ALL,      fmodBodies,                'fmod',      'fmod',  nil,  divisor },  -- torch7's old alias
  { 'remainder',  ALL,      remainderBodies,           nil,         nil,     nil,  divisor },
}

P.binaryOps {
  { 'cmul',        ALL,      '$2 * $3',                  'multiply' },
  { 'cdiv',        ALL,      '$2 / $3',                  'divide' },
  { 'cpow',        ALL,      '$2 ^ $3',                  'power' },
  { 'cfmod',       ALL,      withTensor(fmodBodies),     'fmod' },
  { 'cmod',        ALL,      withTensor(fmodBodies),     'fmod' },   -- torch7's old alias
  { 'cremainder',  ALL,      withTensor(remainderBodies) },
  { 'atan2',       FLOATS,   'math.atan2($2, $3)',       'arctan2', function(y, x)
      check.number('atan2', x)
      return math.atan2(y, x)
    end },
}

------------------------------------------------------------------------------------------------
-- add and csub: r = a + v, r = a + b, r = a + v * b (csub subtracts)

local addValue = mapScalar('add', '$1 = $2 + v1', 'add')
local addTensor = map2('cadd', '$1 = $2 + $3', 'add')
local subTensor = map2('csub', '$1 = $2 - $3', 'subtract')
local axpyKernel = kernels(3, '$1 = $2 + v1 * $3')

-- r = a + v * b. In place on contiguous Float / Double (r is a, b is r or apart from it) BLAS's
-- axpy does it in one vectorized pass, as torch7's cadd.
local function axpy(r, a, b, v)
  local dt, n = r._dt, numel(r)
  if blas.axpy and not dt.integer and not dt.half and n > 0 and r._st == a._st and r._off == a._off
      and isContiguous(r) and isContiguous(a) and isContiguous(b) and b._dt == dt then
    local pr, pb = address(r), address(b)
    if pb == pr or pb + n * dt.size <= pr or pr + n * dt.size <= pb then
      return blas.axpy(dt, n, v, data(b), 1, data(r), 1)
    end
  end
  axpyKernel[dt.id](r, a, b, v)
end

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
    local dt = a._dt
    v = toReal(dt, sign * v)
    r = result(name, r, a):resizeAs(a)
    if not t then addValue(r, a, v)
    elseif v == 1 then addTensor(r, a, t)
    elseif v == -1 and not dt.integer then subTensor(r, a, t)
    else axpy(r, a, t, v) end
    return r
  end
end
P.define('add', addCore('add', 1), '[res,] tensor, value | [res,] tensor1, [value,] tensor2')
P.define('csub', addCore('csub', -1), '[res,] tensor, value | [res,] tensor1, [value,] tensor2')

------------------------------------------------------------------------------------------------
-- clamp(min, max), lerp(b, weight), addcmul / addcdiv([value,] t1, t2)

-- torch7: x < min and min or (x > max and max or x); with min <= max that is min(max(x, lo), hi).
local clampBranches = 'local x = $2; if x < v1 then x = v1 elseif x > v2 then x = v2 end; $1 = x'
local clampOrdered = kernels(2, { F = '$1 = math.min(v2, math.max(v1, $2))', I = '$1 = math.min(v2, math.max(v1, $2))',
                                  L = clampBranches })
local clampAny = kernels(2, clampBranches)
P.define('clamp', function(r, a, lo, hi, extra)
  if not isTensor(a) or type(lo) ~= 'number' or type(hi) ~= 'number' or extra ~= nil then return nil end
  supports('clamp', ALL, a)
  local dt = a._dt
  lo, hi = toReal(dt, lo), toReal(dt, hi)
  r = result('clamp', r, a):resizeAs(a)
  local run = (lo <= hi and clampOrdered[dt.id]) or clampAny[dt.id]
  run(r, a, lo, hi)
  return r
end, '[res,] tensor, min_value, max_value')

local lerpKernel = kernels(3, 'local x = $2; $1 = x + v1 * ($3 - x)')
P.define('lerp', function(r, a, b, w, extra)
  if not isTensor(a) or not isTensor(b) or type(w) ~= 'number' or extra ~= nil then return nil end
  supports('lerp', FLOATS, a)
  partner('lerp', a, b)
  w = toReal(a._dt, w)
  r = result('lerp', r, a):resizeAs(a)
  lerpKernel[a._dt.id](r, a, b, w)
  return r
end, '[res,] a, b, weight', function(a, b, w)
  check.number('lerp', b)
  check.number('lerp', w)
  return a + w * (b - a)
end)

local addc = {
  addcmul = kernels(3, '$1 = $1 + v1 * $2 * $3'),
  -- integer division truncates, as C
  addcdiv = kernels(3, { F = '$1 = $1 + v1 * $2 / $3', I = '$1 = $1 + torch._libm.trunc(v1 * $2 / $3)',
                         L = '$1 = $1 + v1 * $2 / $3' }),
}
for name, run in pairs(addc) do
  P.define(name, function(r, t, v, t1, t2, extra)
    if type(v) ~= 'number' then v, t1, t2, extra = 1, v, t1, t2 end
    if not isTensor(t) or not isTensor(t1) or not isTensor(t2) or extra ~= nil then return nil end
    supports(name, ALL, t)
    partner(name, t, t1)
    partner(name, t, t2)
    v = toReal(t._dt, v)
    r = result(name, r, t)
    if r ~= t then r:resizeAs(t):copy(t) end
    run[t._dt.id](r, t1, t2, v)
    return r
  end, '[res,] tensor, [value,] tensor1, tensor2')
end

------------------------------------------------------------------------------------------------
-- pow: r = a ^ v, or (tpow) r = v ^ a

-- torch7's shortcuts for some exponents, then pow().
local powBy = {
  [1] = function(r, a) if r ~= a then r:copy(a) end end,
  [2] = map1('square', '$1 = $2 * $2', { 'square' }),
  [3] = map1('pow', 'local x = $2; $1 = x * x * x'),
  [0.5] = unaryRun.sqrt,
  [-0.5] = unaryRun.rsqrt,
  [-1] = unaryRun.cinv,
  [-2] = map1('pow', 'local x = $2; $1 = 1 / (x * x)', { 'square', 'reciprocal' }),
}
local powValue = mapScalar('pow', '$1 = $2 ^ v1', 'power')
local tpowValue = mapScalar('tpow', '$1 = v1 ^ $2', 'power', 'first')

P.define('pow', function(r, a, b, extra)
  if extra ~= nil then return nil end
  local t, v = a, b
  if type(a) == 'number' then t, v = b, a end
  if not isTensor(t) or type(v) ~= 'number' then return nil end
  supports('pow', FLOATS, t)
  v = toReal(t._dt, v)
  r = result('pow', r, t):resizeAs(t)
  if t == b then tpowValue(r, t, v)
  elseif powBy[v] then powBy[v](r, t)
  else powValue(r, t, v) end
  return r
end, '[res,] tensor, value | [res,] value, tensor', function(x, y)
  check.number('pow', y)
  return x ^ y
end)

return P
