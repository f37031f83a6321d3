-- The CPU elementwise ops behind math/pointwise.lua, compare.lua and copy.lua, registered as
-- fill copy unary binary add addcmul addcdiv clamp lerp (lua/torch/README.md, "The front end
-- and the op table"). Operands arrive checked, results sized, numbers already of the operands'
-- element type (the front end casts them as torch7 casts its `real` arguments).
-- Float and Double operands run numpy's SIMD loops (backend/cpu/ufunc.lua) when large enough
-- (numpyFrom) and contiguous, 1-D, or 2-D with rows long enough (numpyRowsFrom); everything
-- else runs LuaJIT kernels (apply.kernel).
-- Returns { numpyFrom = ... }: the tests and bench/tensor_ops.py move the thresholds.
local ffi = require 'ffi'
local torch = require 'torch.env'
local dtype = require 'torch.core.dtype'
local memory = require 'torch.core.memory'
local backend = require 'torch.backend'
local check = require 'torch.core.check'
local apply = require 'torch.backend.cpu.apply'
local ufunc = require 'torch.backend.cpu.ufunc'
local blas = require 'torch.backend.cpu.blas'

local numel, isContiguous = apply.numel, apply.isContiguous

------------------------------------------------------------------------------------------------
-- where numpy's loops take over

-- Element counts from which an op runs numpy's loop on contiguous Float / Double operands
-- rather than the LuaJIT kernel. Measured with `python bench/tensor_ops.py --thresholds` (AMD
-- EPYC Zen 5 with AVX-512, numpy 2.4): a loop call costs a few ns, so numpy wins from 4 to 16
-- elements and by 4x (+, *) to 50x (tanh) at 1024; ops switch at 16 but for these exceptions.
-- Keys are the op names, with a 'c' before a binary op's tensor form (cadd, cmul, cmax...).
local numpyFromAll = 16
local numpyFrom = {
  floor   = { Float = 32,  Double = 16 },
  rsqrt   = { Float = 16,  Double = 256 },   -- two loops
  sigmoid = { Float = 64,  Double = 512 },   -- four loops
  square  = { Float = 512, Double = 256 },   -- x * x is as fast in Lua
}

-- An op key, with its thresholds (the default unless an exception above).
local function numpyKey(key)
  numpyFrom[key] = numpyFrom[key] or { Float = numpyFromAll, Double = numpyFromAll }
  return key
end

local intptr = ffi.typeof('intptr_t')
local charp = ffi.typeof('char *')
local typeChar = { Float = 'f', Double = 'd' }

-- The byte address of t's first element, as a number.
local function address(t) return tonumber(ffi.cast(intptr, t._st._ptr)) + t._off * t._dt.size end
local function data(t) return t._st._ptr + t._off end

-- Whether an n-element op `key` on dt runs numpy's loop: numpy lends the type and n reaches
-- the op's threshold.
local function numpyWorth(key, dt, n)
  local from = numpyFrom[key]
  local least = from and from[dt.name]
  return least and n >= least and n > 0
end

-- The address of r's elements when numpy's loop may write them in one run: contiguous and
-- aligned; else nil.
local function numpyTarget(r)
  if not isContiguous(r) then return nil end
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

-- Strided operands: numpy's loops take a byte step per operand, so a 1-D strided run is one
-- loop call, and a 2-D view whose rows are runs one call per row.

-- Elements per row from which a 2-D view runs numpy's loop row by row rather than the LuaJIT
-- kernel's one strided loop. Measured on 1024-row narrows (2-core Xeon, AVX-512): at 4 per row
-- add and mul gain 2x but sigmoid (four loops) loses 1.6x; at 8 sigmoid ties and tanh gains 4x;
-- on 32x128 narrows of 32x512 Float sigmoid takes 4.4 us (kernel 25), tanh 3.0 (57), add 0.9 (14).
local numpyRowsFrom = 8

-- t's elements as rows x cols at element steps rowStep, colStep: rows 1 for a single run (1-D,
-- or 2-D walking as one). nil beyond 2 dims (the kernels collapse those) or for a negative step.
local function grid(t)
  local sz, st = t._sz, t._str
  local nd = #sz
  if nd == 1 then
    if st[1] < 0 then return nil end
    return 1, sz[1], 0, st[1]
  end
  if nd ~= 2 then return nil end
  local rows, cols, sr, sc = sz[1], sz[2], st[1], st[2]
  if sr < 0 or sc < 0 then return nil end
  if rows == 1 then return 1, cols, 0, sc end
  if cols == 1 then return 1, rows, 0, sr end
  if sr == cols * sc then return 1, rows * cols, 0, sc end
  return rows, cols, sr, sc
end

-- The walk numpy's loops take together over r, a (and b): R rows of C elements, each operand's
-- element steps between rows and along one. Upvalues, set by `walk`, so a call allocates nothing.
local R, C, rRow, rCol, aRow, aCol, bRow, bCol

-- An operand's steps in the walk: its own rows, or its single run cut into rows of C.
local function fit(rows, cols, rowStep, colStep)
  if rows == R and cols == C then return rowStep, colStep end
  if rows == 1 then return C * colStep, colStep end
end

-- Whether r, a (and b) walk alike as rows of numpy loop calls; r must write each element once.
local function walk(r, a, b)
  local rr, rc, rrs, rcs = grid(r)
  local ar, ac, ars, acs = grid(a)
  local br, bc, brs, bcs = 1, 0, 0, 0
  if b then br, bc, brs, bcs = grid(b) end
  if not (rr and ar and br) or rcs == 0 or (rr > 1 and rrs == 0) then return false end
  R, C = rr, rc
  if R == 1 then R, C = ar, ac end
  if R == 1 and b then R, C = br, bc end
  if R > 1 and C < numpyRowsFrom then return false end
  rRow, rCol = fit(rr, rc, rrs, rcs)
  aRow, aCol = fit(ar, ac, ars, acs)
  bRow, bCol = 0, 0
  if b then bRow, bCol = fit(br, bc, brs, bcs) end
  return rRow ~= nil and aRow ~= nil and bRow ~= nil
end

-- Whether numpy's loops may read source t (steps sRow, sCol of the walk) while writing r row
-- by row: aligned, and r's very elements or apart from r's, overall or row by row (a call
-- reads one row ahead in blocks; rows go in order, as torch7's elements).
local function apartInRows(t, sRow, sCol, r)
  local p, s, pr, sr = address(t), t._dt.size, address(r), r._dt.size
  if p % s ~= 0 or pr % sr ~= 0 then return false end
  if p == pr and s == sr and sCol == rCol and (R == 1 or sRow == rRow) then return true end
  local span, spanR = ((R - 1) * sRow + (C - 1) * sCol + 1) * s, ((R - 1) * rRow + (C - 1) * rCol + 1) * sr
  if p + span <= pr or pr + spanR <= p then return true end
  if R == 1 or sRow * s ~= rRow * sr then return false end
  local row, rowR = ((C - 1) * sCol + 1) * s, ((C - 1) * rCol + 1) * sr
  return p + row <= pr or pr + rowR <= p
end

-- fn(c1, c2, c3, n, pa, sa, pb, sb, pr, sr) once per row of the walk, with byte steps; pa, pb
-- and pr are the operands' first elements (pb nil without b).
local function byRows(fn, c1, c2, c3, pa, pb, pr, size, rsize)
  local sa, sb, sr = aCol * size, bCol * size, rCol * rsize
  if R == 1 then return fn(c1, c2, c3, C, pa, sa, pb, sb, pr, sr) end
  for i = 0, R - 1 do
    fn(c1, c2, c3, C, pa + i * aRow, sa, pb and pb + i * bRow, sb, pr + i * rRow, sr)
  end
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

-- A one-element buffer per element type: numpy's scalar operands (step 0).
local scalars = {}
for _, dt in ipairs(dtype.list) do scalars[dt.id] = ffi.new(dt.ctype .. '[1]') end

------------------------------------------------------------------------------------------------
-- LuaJIT kernels

-- C functions that kernel bodies reach as torch._libm.f (Lua's math lacks them); the front end
-- uses them for its number forms.
ffi.cdef [[
double luabridge_trunc(double) asm("trunc");
double luabridge_round(double) asm("round");
double luabridge_log1p(double) asm("log1p");
]]
torch._libm = { trunc = ffi.C.luabridge_trunc, round = ffi.C.luabridge_round, log1p = ffi.C.luabridge_log1p }

-- Element type classes for kernel bodies: F computes in double, I (Byte to Int) in double and
-- stores truncated, L in int64 arithmetic (Long elements read as int64 cdata).
local function classOf(dt) return dt.integer and (dt.int64 and 'L' or 'I') or 'F' end

-- A body for '$1 = ...' given as its right-hand side (a body naming $1 is whole); bodies is
-- one body for every type or { F =, I =, L = }.
local function assign(body)
  if type(body) == 'table' then
    local r = {}
    for k, v in pairs(body) do r[k] = assign(v) end
    return r
  end
  return body:find('$1', 1, true) and body or '$1 = ' .. body
end

local runners = {}
local function runner(n, body)
  local key = n .. body
  if not runners[key] then runners[key] = apply.kernel(n, body) end
  return runners[key]
end

-- apply.kernel runners by dtype id for an n-operand op (L falls back on I; a class without a
-- body has none: the front end refuses its types).
local function kernels(n, bodies)
  bodies = assign(bodies)
  local byType = {}
  for _, dt in ipairs(dtype.list) do
    local c = classOf(dt)
    local body = type(bodies) == 'string' and bodies or bodies[c] or (c == 'L' and bodies.I)
    byType[dt.id] = body and runner(n, body) or false
  end
  return byType
end

------------------------------------------------------------------------------------------------
-- runners: kernel or numpy loop

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
  -- a step reads src at byte step ss, writes out at os
  local function stepFrom(i)
    local s, after = steps[i], steps[i + 1] and stepFrom(i + 1)
    return function(dt, n, src, ss, out, os)
      if s.c then
        local k = scalars[dt.id]
        k[0] = s.c
        ufunc.binary(s.loop(dt), n, src, ss, k, 0, out, os)
      else
        ufunc.unary(s.loop(dt), n, src, ss, out, os)
      end
      if after then return after(dt, n, out, os, out, os) end
    end
  end
  local first = stepFrom(1)
  local function firstRow(dt, _, _, n, src, ss, _, _, out, os) return first(dt, n, src, ss, out, os) end
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
    if numpyWorth(key, dt, n) and numpyHas(dt) then
      local pr, size = numpyTarget(r), dt.size
      if pr and numpySource(a, r, pr, n) then return first(dt, n, data(a), size, data(r), size) end
      if walk(r, a) and apartInRows(a, aRow, aCol, r) then
        return byRows(firstRow, dt, nil, nil, data(a), nil, data(r), size, size)
      end
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

-- r = f(a, v) for a number v; the kernels see v as v1 (and v2). numpy's ufuncName takes v second
-- at step 0; operand 'first' puts it first, 'array' passes an array of copies (in CHUNK-sized
-- calls; not for nan, which fmax and fmin skip where torch7 keeps it).
local function mapScalar(key, bodies, ufuncName, operand, boolOut)
  local run = kernels(2, bodies)
  local loop = ufuncName and numpyLoop(ufuncName, 2, boolOut)
  local copies = operand == 'array' and constants()
  -- pa, pr at byte steps sa, sr (the array of copies at dt.size)
  local function numpyRun(l, dt, v, n, pa, sa, _, _, pr, sr)
    local size = dt.size
    if copies then
      if n <= CHUNK then return ufunc.binary(l, n, pa, sa, copies(dt, v, n), size, pr, sr) end
      local buf = copies(dt, v, CHUNK)
      local ca, cr = ffi.cast(charp, pa), ffi.cast(charp, pr)
      for off = 0, n - 1, CHUNK do
        ufunc.binary(l, math.min(CHUNK, n - off), ca + off * sa, sa, buf, size, cr + off * sr, sr)
      end
      return
    end
    local k = scalars[dt.id]
    k[0] = v
    if operand == 'first' then return ufunc.binary(l, n, k, 0, pa, sa, pr, sr) end
    ufunc.binary(l, n, pa, sa, k, 0, pr, sr)
  end
  if loop then numpyKey(key) end
  return function(r, a, v, v2)
    local dt = a._dt
    if loop and (v == v or not copies) and r._dt == (boolOut and dtype.Byte or dt) then
      local n = numel(r)
      if numpyWorth(key, dt, n) and loop(dt) then
        local pr, size, rsize = numpyTarget(r), dt.size, r._dt.size
        if pr and numpySource(a, r, pr, n) then
          return numpyRun(loop(dt), dt, v, n, data(a), size, nil, nil, data(r), rsize)
        end
        if walk(r, a) and apartInRows(a, aRow, aCol, r) then
          return byRows(numpyRun, loop(dt), dt, v, data(a), nil, data(r), size, rsize)
        end
      end
    end
    run[dt.id](r, a, v, v2)
  end
end

-- r = f(a, b) for tensors of a's type with r's element count; the kernels see v as v1.
local function binaryRow(l, _, _, n, pa, sa, pb, sb, pr, sr) ufunc.binary(l, n, pa, sa, pb, sb, pr, sr) end
local function map2(key, bodies, ufuncName, boolOut)
  local run = kernels(3, bodies)
  local loop = ufuncName and numpyLoop(ufuncName, 2, boolOut)
  if loop then numpyKey(key) end
  return function(r, a, b, v)
    local dt = a._dt
    if loop and r._dt == (boolOut and dtype.Byte or dt) then
      local n = numel(r)
      if numpyWorth(key, dt, n) and loop(dt) then
        local pr, size, rsize = numpyTarget(r), dt.size, r._dt.size
        if pr and numpySource(a, r, pr, n) and numpySource(b, r, pr, n) then
          return ufunc.binary(loop(dt), n, data(a), size, data(b), size, data(r), rsize)
        end
        if walk(r, a, b) and apartInRows(a, aRow, aCol, r) and apartInRows(b, bRow, bCol, r) then
          return byRows(binaryRow, loop(dt), nil, nil, data(a), data(b), data(r), size, rsize)
        end
      end
    end
    run[dt.id](r, a, b, v)
  end
end

------------------------------------------------------------------------------------------------
-- fill and copy

local fillKernel = apply.kernel(1, '$1 = v1')
local copyKernel = apply.kernel(2, '$1 = $2')
-- LuaJIT's compiled int64 -> float store yields wrong values (the interpreter's is right): go
-- through a double for Long -> Float
local copyViaDouble = apply.kernel(2, '$1 = tonumber($2)')

-- r = a, across element types and strides.
local function copy(r, a)
  if numel(r) == 0 then return end
  if r._dt.half or a._dt.half then
    memory.py.copy_tensor(r, a)
  elseif r._dt.name == 'Float' and a._dt.name == 'Long' then
    copyViaDouble(r, a)
  else
    copyKernel(r, a)
  end
end

-- All-zero bits are 0 in every type, Half included: a contiguous zero fill is one memset. Half
-- holds other values through a Float tensor.
-- Zeroing a large contiguous tensor (a training step's grads:zero() over the flat gradients)
-- runs as memsets of contiguous chunks on the threads of torch.backend.cpu.parallel (its switch
-- turns it off), from zeroThreads.least bytes a thread: measured on 2 cores, 0.26 -> 0.20 ms
-- at 8 MB, 1.72 -> 1.02 at 47 MB (ResNet-18's gradients), losing at 2.7 MB (0.085 -> 0.116);
-- bench/serial_passes.lua, docs/performance.md "Serial fractions, pass by pass". Every byte is
-- written once whatever the thread count.
local zeroThreads = { least = 4 * 2 ^ 20, runs = 0 }
local parallel   -- torch.backend.cpu.parallel, loaded at the first large zeroing (it requires blas)
local zeroLoop
local function zeroBytes(p, bytes)
  parallel = parallel or require 'torch.backend.cpu.parallel'
  -- blas.threadsFor as for a BLAS call, not parallel.threads' (foreign): OpenBLAS's workers,
  -- still spinning for 0.1 ms after the SGD update's axpy that comes just before the next step's
  -- zeroing, yield their CPU while they spin (in ResNet-18's step the memset's worker then took
  -- 2.9 of its 4.5 ms; counted as foreign, the zeroing never split there)
  local threads = bytes >= 2 * zeroThreads.least and parallel.enabled and blas.threadsFor(bytes, zeroThreads.least) or 1
  if threads < 2 then return ffi.fill(p, bytes, 0) end
  zeroLoop = zeroLoop or parallel.loop('zero', [[
local ffi = require 'ffi'
return function(lo, hi, p, chunk, bytes)
  for c = lo, hi - 1 do
    local a = c * chunk
    ffi.fill(p + a, math.min(chunk, bytes - a), 0)
  end
end]], { 'uint8_t *', 'number', 'number' })[dtype.Byte]
  local chunks = 4 * threads
  local chunk = math.ceil(bytes / chunks / 64) * 64   -- whole cache lines
  zeroThreads.runs = zeroThreads.runs + 1
  zeroLoop(threads, math.ceil(bytes / chunk), ffi.cast('uint8_t *', p), chunk, bytes)
end

local function fill(r, v)
  if v == 0 and 1 / v > 0 and isContiguous(r) then   -- not -0
    local n = numel(r)
    if n > 0 then zeroBytes(data(r), n * r._dt.size) end
  elseif r._dt.half and v ~= 0 then
    local f = torch.FloatTensor():resize(r._sz)
    fillKernel(f, v)
    copy(r, f)
  else
    fillKernel(r, v)
  end
end

------------------------------------------------------------------------------------------------
-- unary: r = f(a)

local unaryKernels = {
  -- name      kernel body (F)                                numpy chain
  { 'exp',     'math.exp($2)',                                { 'exp' } },
  { 'log',     'math.log($2)',                                { 'log' } },
  { 'log1p',   'torch._libm.log1p($2)',                       { 'log1p' } },
  { 'sqrt',    'math.sqrt($2)',                               { 'sqrt' } },
  { 'rsqrt',   '1 / math.sqrt($2)',                           { 'sqrt', 'reciprocal' } },
  { 'sigmoid', '1 / (1 + math.exp(-$2))',                     { 'negative', 'exp', { 'add', 1 }, 'reciprocal' } },
  { 'sin',     'math.sin($2)',                                { 'sin' } },
  { 'cos',     'math.cos($2)',                                { 'cos' } },
  { 'tan',     'math.tan($2)',                                { 'tan' } },
  { 'asin',    'math.asin($2)',                               { 'arcsin' } },
  { 'acos',    'math.acos($2)',                               { 'arccos' } },
  { 'atan',    'math.atan($2)',                               { 'arctan' } },
  { 'sinh',    'math.sinh($2)',                               { 'sinh' } },
  { 'cosh',    'math.cosh($2)',                               { 'cosh' } },
  { 'tanh',    'math.tanh($2)',                               { 'tanh' } },
  { 'floor',   'math.floor($2)',                              { 'floor' } },
  { 'ceil',    'math.ceil($2)',                               { 'ceil' } },
  { 'trunc',   'torch._libm.trunc($2)',                       { 'trunc' } },
  -- C round() (halves away from zero), unlike numpy's rint
  { 'round',   'torch._libm.round($2)' },
  { 'frac',    'local x = $2; $1 = x - torch._libm.trunc(x)' },
  { 'neg',     '-$2',                                         { 'negative' } },
  { 'cinv',    '1 / $2',                                      { 'reciprocal' } },
  { 'abs',     { F = 'math.abs($2)', I = 'math.abs($2)', L = 'local x = $2; if x < 0 then x = -x end; $1 = x' },
                                                              { 'absolute' } },
  -- torch7's sign: 0 for 0 and nan
  { 'sign',    'local x = $2; $1 = x > 0 and 1 or (x < 0 and -1 or 0)' },
}

local unaryRun = {}
for _, spec in ipairs(unaryKernels) do unaryRun[spec[1]] = map1(spec[1], spec[2], spec[3]) end

local function unary(name, r, a) return unaryRun[name](r, a) end

------------------------------------------------------------------------------------------------
-- binary: r = f(a, v) for a number v, r = f(a, b) for a tensor b

-- The masks giving rshift the unsigned operand torch7 shifts (C shifts the unsigned value).
local unsignedMask = { Byte = 0xFF, Char = 0xFF, Short = 0xFFFF, Int = 0xFFFFFFFF }

local fmodBodies = { F = 'math.fmod($2, v1)', I = 'math.fmod($2, v1)', L = '$2 % v1' }
local remainderBodies = {
  F = 'local x = $2; $1 = x - v1 * math.floor(x / v1)',
  I = '$2 % v1',
  L = 'local m = $2 % v1; if m ~= 0 and (m < 0) ~= (v1 < 0) then m = m + v1 end; $1 = m',
}
-- the same with the tensor operand as v1
local function withTensor(bodies)
  local r = {}
  for k, body in pairs(assign(bodies)) do r[k] = 'local y = $3; ' .. body:gsub('v1', 'y') end
  return r
end

-- math.max(x, y) is x > y and x or y (maxsd): torch7's rule, nan included. int64 cdata have no
-- math.max. numpy's fmax / fmin agree with torch7 for any value v but nan.
local function extreme(fn, op, withValue)
  local y = withValue and 'v1' or '$3'
  return { F = ('%s($2, %s)'):format(fn, y), I = ('%s($2, %s)'):format(fn, y),
           L = ('local x, y = $2, %s; if x %s y then $1 = x else $1 = y end'):format(y, op) }
end

-- rshift's kernels take the mask beside a number (v2), or as v1 beside a tensor.
local function withMask(run) return function(r, a, b) run(r, a, b, unsignedMask[a._dt.name]) end end

-- name -> { number = runner(r, a, v), tensor = runner(r, a, b) }
local binaryRun = {
  add = { number = mapScalar('add', '$2 + v1', 'add'), tensor = map2('cadd', '$2 + $3', 'add') },
  sub = { tensor = map2('csub', '$2 - $3', 'subtract') },
  mul = { number = mapScalar('mul', '$2 * v1', 'multiply'), tensor = map2('cmul', '$2 * $3', 'multiply') },
  div = { number = mapScalar('div', '$2 / v1', 'divide'), tensor = map2('cdiv', '$2 / $3', 'divide') },
  fmod = { number = mapScalar('fmod', fmodBodies, 'fmod'), tensor = map2('cfmod', withTensor(fmodBodies), 'fmod') },
  remainder = { number = mapScalar('remainder', remainderBodies),
                tensor = map2('cremainder', withTensor(remainderBodies)) },
  pow = { tensor = map2('cpow', '$2 ^ $3', 'power') },   -- its number form below
  tpow = { number = mapScalar('tpow', 'v1 ^ $2', 'power', 'first') },   -- r = v ^ a
  max = { number = mapScalar('cmax', extreme('math.max', '>', true), 'fmax', 'array'),
          tensor = map2('cmax', extreme('math.max', '>')) },
  min = { number = mapScalar('cmin', extreme('math.min', '<', true), 'fmin', 'array'),
          tensor = map2('cmin', extreme('math.min', '<')) },
  atan2 = { tensor = map2('atan2', 'math.atan2($2, $3)', 'arctan2') },
  -- integer types only with a number (the front end multiplies or divides Float and Double by
  -- 2^v); int64 cdata shift logically, the rest through the unsigned mask
  lshift = { number = mapScalar('lshift', { I = 'bit.lshift($2, v1)' }),
             tensor = map2('clshift', { F = '$2 * 2 ^ $3', I = 'bit.lshift($2, $3)',
                                        L = 'bit.lshift($2, tonumber($3))' }) },
  rshift = { number = withMask(mapScalar('rshift', { I = 'bit.rshift(bit.band($2, v2), v1)',
                                                     L = 'bit.rshift($2, v1)' })),
             tensor = withMask(map2('crshift', { F = '$2 / 2 ^ $3', I = 'bit.rshift(bit.band($2, v1), $3)',
                                                 L = 'bit.rshift($2, tonumber($3))' })) },
  bitand = { number = mapScalar('bitand', 'bit.band($2, v1)'), tensor = map2('cbitand', 'bit.band($2, $3)') },
  bitor = { number = mapScalar('bitor', 'bit.bor($2, v1)'), tensor = map2('cbitor', 'bit.bor($2, $3)') },
  bitxor = { number = mapScalar('bitxor', 'bit.bxor($2, v1)'), tensor = map2('cbitxor', 'bit.bxor($2, $3)') },
}

-- comparisons: into a 0/1 ByteTensor (numpy's bool output) or a result of a's type
for name, c in pairs {
  lt = { '<', 'less' }, le = { '<=', 'less_equal' }, gt = { '>', 'greater' },
  ge = { '>=', 'greater_equal' }, eq = { '==', 'equal' }, ne = { '~=', 'not_equal' },
} do
  binaryRun[name] = {
    number = mapScalar('compare', ('$1 = ($2 %s v1) and 1 or 0'):format(c[1]), c[2], nil, true),
    tensor = map2('compare', ('$1 = ($2 %s $3) and 1 or 0'):format(c[1]), c[2], true),
  }
end

-- torch7's shortcuts for some exponents, then pow().
local powValue = mapScalar('pow', '$2 ^ v1', 'power')
local powBy = {
  [1] = function(r, a) if r ~= a then copy(r, a) end end,
  [2] = map1('square', '$2 * $2', { 'square' }),
  [3] = map1('pow', 'local x = $2; $1 = x * x * x'),
  [0.5] = unaryRun.sqrt,
  [-0.5] = unaryRun.rsqrt,
  [-1] = unaryRun.cinv,
  [-2] = map1('pow', 'local x = $2; $1 = 1 / (x * x)', { 'square', 'reciprocal' }),
}
binaryRun.pow.number = function(r, a, v)
  local by = powBy[v]
  if by then return by(r, a) end
  powValue(r, a, v)
end

local function binary(name, r, a, b)
  local forms = binaryRun[name]
  if type(b) == 'number' then return forms.number(r, a, b) end
  forms.tensor(r, a, b)
end

------------------------------------------------------------------------------------------------
-- add: r = a + v * b (r = a + v without b)

local axpyKernel = kernels(3, '$2 + v1 * $3')
local addValue, addTensor, subTensor = binaryRun.add.number, binaryRun.add.tensor, binaryRun.sub.tensor

-- In place on contiguous Float / Double (r is a, b is r or apart from it) BLAS's axpy does it
-- in one vectorized pass, as torch7's cadd.
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

local function add(r, a, v, b)
  if not b then addValue(r, a, v)
  elseif v == 1 then addTensor(r, a, b)
  elseif v == -1 and not r._dt.integer then subTensor(r, a, b)
  else axpy(r, a, b, v) end
end

------------------------------------------------------------------------------------------------
-- addcmul, addcdiv: r = a + v * b * c, r = a + v * b / c

local addc = {
  addcmul = kernels(3, '$1 = $1 + v1 * $2 * $3'),
  -- integer division truncates, as C
  addcdiv = kernels(3, { F = '$1 = $1 + v1 * $2 / $3', I = '$1 = $1 + torch._libm.trunc(v1 * $2 / $3)',
                         L = '$1 = $1 + v1 * $2 / $3' }),
}
local function addcOp(run)
  return function(r, a, v, b, c)
    if r ~= a then copy(r, a) end
    run[r._dt.id](r, b, c, v)
  end
end

------------------------------------------------------------------------------------------------
-- clamp: r = min(max(a, lo), hi); lerp: r = a + w * (b - a)

-- torch7: x < lo and lo or (x > hi and hi or x); with lo <= hi that is min(max(x, lo), hi).
local clampBranches = 'local x = $2; if x < v1 then x = v1 elseif x > v2 then x = v2 end; $1 = x'
local clampOrdered = kernels(2, { F = 'math.min(v2, math.max(v1, $2))', I = 'math.min(v2, math.max(v1, $2))',
                                  L = clampBranches })
local clampAny = kernels(2, clampBranches)
local function clamp(r, a, lo, hi)
  local run = (lo <= hi and clampOrdered[a._dt.id]) or clampAny[a._dt.id]
  run(r, a, lo, hi)
end

local lerpKernel = kernels(3, 'local x = $2; $1 = x + v1 * ($3 - x)')
local function lerp(r, a, b, w) lerpKernel[a._dt.id](r, a, b, w) end

------------------------------------------------------------------------------------------------
-- threaded, blocked programs (luabridge/providers/torch_cpu/blocked.py)

-- Large contiguous Float / Double operands run elementwise programs in Python: numpy's SIMD
-- loops over cache-sized blocks, on the threads blas.threadsFor gives (torch.setnumthreads, never
-- more than the CPUs free). A program of several ops ('x = x - s*m/(sqrt(v) + eps)', optim's
-- steps through torch.elementwise) reads and writes each tensor once rather than once per op,
-- which pays on one thread for Float, as do Float addcmul and addcdiv (LuaJIT kernels here).
-- The other single ops keep numpy's loops called from here and BLAS's axpy: on two threads
-- their programs lost or tied (a 4M-element cmul 1.96 against 1.71 ms, an in-place axpy
-- x:add(v, g) at 11.7M 4.34 against 3.19: one pass over memory gained nothing from a second
-- thread on this machine; bench/blocked.py --priority).
-- Double runs on one thread as fast in the old passes (LuaJIT's loops compute in double; numpy's
-- double loops have half the lanes), so Double programs run only on two threads or more.
-- blocked.enabled = false (or LUABRIDGE_BLOCKED=0 in the environment) keeps every op on the
-- passes above; the tests compare both.
local blocked = {
  enabled = os.getenv('LUABRIDGE_BLOCKED') ~= '0',
  -- the least elements of a program (a call costs 15 to 20 us: Float addcdiv and adam's step
  -- break even at 16K elements on one thread and gain 1.3x at 32K, 1.5x to 1.8x from 256K;
  -- 2-core AVX-512 Xeon, process CPU time, best of 3)
  from = { Float = 32768, Double = 131072 },
  -- the least elements per thread (1 MiB an operand: on 2 threads Adam's step took 20.6 ms
  -- against 30.6 on one at 11.7M, 1.18 against 1.32 at 0.67M, but Dropout's program at 256K
  -- 0.21 against 0.15; bench/blocked.py --priority)
  least = { Float = 262144, Double = 131072 },
  -- whether a program pays on one thread (Double: 0.9x to 1.0x below 1M elements, 1.2x at 4M)
  oneThread = { Float = true, Double = false },
  runs = 0,   -- programs run here so far (the tests' witness)
}
local py = memory.py

-- Whether `names` are exactly the keys of table t.
local function namesOf(t, names)
  local k = 0
  for _ in pairs(t) do k = k + 1 end
  if k ~= #names then return false end
  for i = 1, k do if t[names[i]] == nil then return false end end
  return true
end

-- A tensor's or scalar's name as the program names it: an identifier (the names travel to
-- Python comma-separated, and their order places the addresses: a name with a comma or an empty
-- one would put a tensor under another's name, or a number where an address goes).
local function identifier(name)
  if type(name) ~= 'string' or not name:find('^[%a_][%w_]*$') then
    check.error(('torch.elementwise: name %q is not an identifier (letters, digits, _)'):format(tostring(name)))
  end
  return name
end

-- programs by source (and by source and names where one source came with other names):
-- { id, tensors = sorted names, scalars = sorted names, args = reused }, false where the path
-- is off
local programs = {}
local function programOf(source, tensors, scalars)
  local p = programs[source]
  if p and not (namesOf(tensors, p.tensors) and namesOf(scalars, p.scalars)) then p = nil end
  if p == nil then
    local tn, sn = {}, {}
    for k in pairs(tensors) do tn[#tn + 1] = identifier(k) end
    for k in pairs(scalars) do sn[#sn + 1] = identifier(k) end
    table.sort(tn)
    table.sort(sn)
    local tnames, snames = table.concat(tn, ','), table.concat(sn, ',')
    local key = programs[source] == nil and source or (source .. '|' .. tnames .. '|' .. snames)
    p = programs[key]
    if p == nil then
      local id = py.blocked_compile and py.blocked_compile(source, tnames, snames)
      p = id and { id = id, tensors = tn, scalars = sn, args = {} } or false
      programs[key] = p
    end
  end
  return p
end

-- Whether the n-element run at address pa (element size s) is the one at pb or apart from it.
local function sameOrApart(pa, pb, n, s) return pa == pb or pa + n * s <= pb or pb + n * s <= pa end

-- Runs program `source` over tensors (name -> tensor) and scalars (name -> number) when they
-- qualify: every tensor contiguous, aligned, of one Float or Double type and n elements (at
-- least blocked.from), each pair the same memory or apart, and on 2+ threads where one does not
-- pay (blocked.oneThread).
-- Returns whether it ran (else nothing was touched).
local function runBlocked(source, tensors, scalars)
  if not blocked.enabled then return false end
  local p = programOf(source, tensors, scalars)
  if not p then return false end
  local names, args = p.tensors, p.args
  local dt = tensors[names[1]]._dt
  local from = blocked.from[dt.name]
  if not from then return false end
  local n = numel(tensors[names[1]])
  if n < from or n == 0 then return false end   -- an empty tensor has no storage
  local size = dt.size
  for i = 1, #names do
    local t = tensors[names[i]]
    if t._dt ~= dt or not isContiguous(t) or numel(t) ~= n then return false end
    local pt = address(t)
    if pt % size ~= 0 then return false end
    for j = 1, i - 1 do
      if not sameOrApart(pt, args[4 + j], n, size) then return false end
    end
    args[4 + i] = pt
  end
  local threads = blas.threadsFor(n, blocked.least[dt.name], true)
  if threads < 2 and not blocked.oneThread[dt.name] then return false end
  args[1], args[2], args[3], args[4] = p.id, dt.name, n, threads
  local k = 4 + #names
  for i, name in ipairs(p.scalars) do args[k + i] = scalars[name] end
  py.blocked_run(unpack(args, 1, k + #p.scalars))
  blocked.runs = blocked.runs + 1
  return true
end
blocked.run = runBlocked

-- addcmul's and addcdiv's programs, over tensors r, a, b, c and the number v (a tensor may be
-- another's very memory: each element is read before its own is written).
local function ops(r, a, b, c) return { r = r, a = a, b = b, c = c } end
local function value(v) return { v = v } end

-- r = a + v * b * c (/ c), on one thread too (the kernels above are LuaJIT's). torch7 copies a
-- into r first, so a b or c that is r (r not a) reads a's values there: those stay above.
local function addcBlocked(text, run)
  local fallback = addcOp(run)
  return function(r, a, v, b, c)
    if (r == a or (b ~= r and c ~= r)) and runBlocked(text, ops(r, a, b, c), value(v)) then return end
    fallback(r, a, v, b, c)
  end
end

backend.register('cpu', {
  fill = fill, copy = copy, unary = unary, binary = binary, add = add,
  addcmul = addcBlocked('r = a + v*b*c', addc.addcmul), addcdiv = addcBlocked('r = a + v*b/c', addc.addcdiv),
  clamp = clamp, lerp = lerp,
  -- elementwise(source, tensors, scalars): torch.elementwise's op (true when it ran)
  elementwise = runBlocked,
})

return { numpyFrom = numpyFrom, blocked = blocked, zeroThreads = zeroThreads }
