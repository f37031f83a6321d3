-- The CPU reductions: the kernels behind math/reduce.lua's front end, registered as the ops
-- reduce_all, reduce_dim, argreduce, scan, equal, minmax, dist, renorm (lua/torch/README.md,
-- "The front end and the op table"). Operands arrive checked and results sized.
-- Runs of Float/Double elements (of any type for max/min) from NUMPY_FROM elements reduce in
-- numpy's compiled loops (backend/cpu/ufunc.lua); the rest in LuaJIT loops made per element type.
-- The module returns foldRuns (backend/cpu/join.lua's histograms walk runs with it) and
-- NUMPY_FROM (tests set it to cover both paths).
local ffi = require 'ffi'
local torch = require 'torch.env'
local backend = require 'torch.backend'
local apply = require 'torch.backend.cpu.apply'
local ufunc = require 'torch.backend.cpu.ufunc'

local isTensor, numel, isContiguous = torch.isTensor, apply.numel, apply.isContiguous
local K = {}

local function copyArray(a) local r = {} for i = 1, #a do r[i] = a[i] end return r end

-- A new tensor of type name ('Double', ...) and sizes.
local function newTensor(name, sizes) return torch[name .. 'Tensor']():resize(sizes) end

-- A view of t (size 1 at dim) repeating it n times along dim (stride 0).
local function spread(t, dim, n)
  local sz, st = copyArray(t._sz), copyArray(t._str)
  sz[dim], st[dim] = n, 0
  return torch._makeTensor(getmetatable(t), t._st, t._off, sz, st)
end

-- The runs of a non-contiguous t (see K.foldRuns): its dims by decreasing stride, merged where
-- the layout allows.
local function stridedRuns(t, run, a, c)
  local nd, ptr = #t._sz, t._st._ptr
  local order = {}
  for d = 1, nd do order[d] = d end
  table.sort(order, function(i, j) return math.abs(t._str[i]) > math.abs(t._str[j]) end)
  local sz, st = {}, {}
  for i = 1, nd do
    local d = order[i]
    local n, s = t._sz[d], t._str[d]
    if n ~= 1 then
      local m = #sz
      if m > 0 and st[m] == s * n then sz[m], st[m] = sz[m] * n, s
      else sz[m + 1], st[m + 1] = n, s end
    end
  end
  local m = #sz
  if m == 1 then return run(ptr + t._off, sz[1], st[1], a, c) end
  local n, s = sz[m], st[m]
  apply.slices({ { _sz = sz, _str = st, _off = t._off } }, m, function(o) a = run(ptr + o, n, s, a, c) end)
  return a
end

-- Folds a = run(p, n, s, a, c) from a over 1-D runs covering all of t's elements, in no
-- particular order, and returns a: p points at a run's first element, which has n elements
-- at stride s.
function K.foldRuns(t, run, a, c)
  local total = numel(t)
  if total == 0 then return a end
  if isContiguous(t) then return run(t._st._ptr + t._off, total, 1, a, c) end
  return stridedRuns(t, run, a, c)
end

-- apply.kernel runners by body, made on first use.
local runners = {}
local function kernel(n, body)
  local key = n .. body
  local k = runners[key]
  if not k then k = apply.kernel(n, body); runners[key] = k end
  return k
end

-- t[dt] = make(dt), made on first use.
local function byType(make)
  return setmetatable({}, { __index = function(t, dt)
    local v = make(dt)
    t[dt] = v
    return v
  end })
end

-- Calls fn(i, ...) for i = 0 .. count - 1; for one, without entering the loop: a loop entered on
-- every call but seldom looping would make the callers' traces abort. (The arguments are passed
-- on, rather than captured in a closure: making a closure aborts the trace of its maker.)
local function times(count, fn, a, b, c, d, e, f, g, h)
  if count == 1 then return fn(0, a, b, c, d, e, f, g, h) end
  for i = 0, count - 1 do fn(i, a, b, c, d, e, f, g, h) end
end

-- The type accumulations run in: torch7's accreal (long for integers, double for floats).
local function accName(dt) return dt.integer and 'Long' or 'Double' end

local uintptr = ffi.typeof('uintptr_t')
-- Whether t's elements lie at addresses that are multiples of their size, as numpy's loops need.
local function aligned(t) return tonumber(ffi.cast(uintptr, t._st._ptr)) % t._dt.size == 0 end

------------------------------------------------------------------------------------------------
-- numpy's loops in reduce mode

-- Runs of this many elements and more go to numpy's loop: a call costs about as much as a few
-- elements in Lua, and the loops run SIMD. (A field, so that tests can cover both paths.)
K.NUMPY_FROM = 16
-- numpy lends no loop adding float32 elements into a double (torch7's accreal for Float). Float
-- runs are summed in blocks of FLOAT_BLOCK elements by numpy's float32 add, which sums pairwise
-- (error about 20 float32 roundings of the block's magnitude, where a float32 running sum has
-- one per element), and the blocks' sums add up in double.
local FLOAT_BLOCK = 4096
-- Float slabs (sums along an outer dim) add up in float32 in groups of this many, the groups'
-- sums in double.
local FLOAT_GROUP = 16

local typeChar = { Byte = 'B', Char = 'b', Short = 'h', Int = 'i', Long = 'q', Float = 'f', Double = 'd' }

-- numpy's loop of ufunc `name` with nin operands of dt's elements (and a bool result with
-- boolOut), or false.
local function numpyLoop(name, dt, nin, boolOut)
  local c = typeChar[dt.name]
  return c and ufunc.loop(name, c:rep(nin or 2) .. '->' .. (boolOut and '?' or c)) or false
end

-- numpy's add loop for dt's elements (Float and Double only: other sums need wider accumulators).
local ADD = byType(function(dt) return (dt.name == 'Float' or dt.name == 'Double') and numpyLoop('add', dt) end)

-- A run adding its sum to a with numpy's add (Float/Double), lua's below NUMPY_FROM elements.
-- (The block loop is entered only for runs of several blocks: see `times`.)
local function numpySum(dt, lua)
  local l = ADD[dt]
  if not l then return false end
  local acc, size = ffi.new(dt.ctype .. '[1]'), dt.size
  local block = dt.name == 'Float' and FLOAT_BLOCK or math.huge
  local function sum(p, n, s)
    acc[0] = 0
    ufunc.reduce(l, n, p, s * size, acc)
    return acc[0]
  end
  return function(p, n, s, a)
    if n < K.NUMPY_FROM then return lua(p, n, s, a) end
    if n <= block then return a + sum(p, n, s) end
    for o = 0, n - 1, block do a = a + sum(p + o * s, math.min(block, n - o), s) end
    return a
  end
end

-- A run taking the extreme m of m and its elements with numpy's loop l (maximum or minimum: a
-- NaN wins).
local function numpyExtreme(l, dt, lua)
  if not l then return false end
  local acc, size = ffi.new(dt.ctype .. '[1]'), dt.size
  return function(p, n, s, m)
    if n < K.NUMPY_FROM then return lua(p, n, s, m) end
    acc[0] = m
    ufunc.reduce(l, n, p, s * size, acc)
    return acc[0]
  end
end

------------------------------------------------------------------------------------------------
-- reducers: run(p, n, s, a, c) -> a, in Lua (red.lua[dt]) and through numpy (red.numpy[dt],
-- false where it lends no loop)

local NONE = setmetatable({}, { __index = function() return false end })

-- The run of reducer red for t's elements.
local function runOf(red, t)
  local np = red.numpy[t._dt]
  if np and aligned(t) then return np end
  return red.lua[t._dt]
end

-- red over all of x from a, as a Lua number.
local function reduceAll(x, red, a, c)
  if numel(x) == 0 then return tonumber(a) end
  return tonumber(K.foldRuns(x, runOf(red, x), a, c))
end

-- kernels[dt] from Lua source made per accumulation class: source(suffix) with suffix 'LL' for
-- integers (int64 accumulators), '' for floats (double).
local function perClass(name, source)
  local floats, integers = apply.perType(name, source('')), apply.perType(name, source('LL'))
  return byType(function(dt) return dt.integer and integers[dt] or floats[dt] end)
end

-- A fold a = a OP f(x) over elements; f is an expression of X (the element) and C (a scalar).
-- f.lua[dt](p, n, s, a, c) folds a run into a: short runs in order, as torch7 does (so that
-- small results are torch7's to the last bit), longer ones in four accumulators that make
-- independent chains the CPU overlaps. f.slabs[perPosition][dt](src, n, inner, acc, c) sets
-- acc[j] (inner of them) to the fold of src[i * inner + j] over i < n, with C = c[j] when
-- perPosition.
local function fold(op, unit, expr)
  local function element(c) return expr:gsub('X', 'v'):gsub('C', c) end
  local e = element('c')
  local lua = perClass('fold', function(suffix)
    local u = unit .. suffix
    local step = {}
    for k, at in ipairs({ 'q', 'q + s', 'q + s2', 'q + s3' }) do
      step[k] = ('do local v = p[%s]; a%d = a%d %s %s end'):format(at, k - 1, k - 1, op, e)
    end
    return ([[
return function(p, n, s, a0, c)
  a0 = a0 %s %s
  local q = 0
  if n < 32 then
    for _ = 1, n do local v = p[q]; a0 = a0 %s %s; q = q + s end
    return a0
  end
  local a1, a2, a3 = %s, %s, %s
  local s2, s3, s4 = 2 * s, 3 * s, 4 * s
  for _ = 1, (n - n %% 4) / 4 do
    %s %s %s %s
    q = q + s4
  end
  for _ = 1, n %% 4 do
    local v = p[q]; a0 = a0 %s %s
    q = q + s
  end
  return (a0 %s a1) %s (a2 %s a3)
end]]):format(op, u, op, e, u, u, u, step[1], step[2], step[3], step[4], op, e, op, op, op)
  end)
  local slabs = {}
  for _, perPosition in ipairs({ false, true }) do
    slabs[perPosition] = perClass('foldslabs', function(suffix)
      return ([[
return function(src, n, inner, acc, c)
  for j = 0, inner - 1 do acc[j] = %s end
  for i = 0, n - 1 do
    local row = src + i * inner
    for j = 0, inner - 1 do local v = row[j]; acc[j] = acc[j] %s %s end
  end
end]]):format(unit .. suffix, op, element(perPosition and 'c[j]' or 'c'))
    end)
  end
  return { op = op, unit = unit, expr = expr, numpy = NONE, lua = lua, slabs = slabs }
end

local SUM = fold('+', 0, 'X')
local PROD = fold('*', 1, 'X')
local SQUARES = fold('+', 0, 'X * X')
local SQDEV = fold('+', 0, '(X - C) * (X - C)')
local NONZERO = fold('+', 0, '(X ~= 0 and 1 or 0)')
local ABS = fold('+', 0, 'math.abs(X)')
local POWABS = fold('+', 0, 'math.abs(X) ^ C')
SUM.numpy = byType(function(dt) return numpySum(dt, SUM.lua[dt]) end)

-- The fold over all of x, as a Lua number.
local function foldAll(x, f, c) return reduceAll(x, f, f.unit, c) end

-- max and min: torch7 keeps the first extreme and lets a NaN win (the first NaN). `keep`: the
-- running extreme m stays when `v keep m`.
local EXTREMES = {}
for name, keep in pairs({ max = '<=', min = '>=' }) do
  -- spreadBody: the kernel body over (extremes, positions, x, position of x's element along dim)
  local e = { spreadBody = ('if not ($3 %s $1) and $1 == $1 then $1 = $3; $2 = $4 end'):format(keep) }
  -- the extreme of m and a run's elements; returns at once with a NaN
  local exact = apply.perType(name, ([[
return function(p, n, s, m)
  if m ~= m then return m end
  local q = 0
  for _ = 1, n do
    local v = p[q]
    if not (v %s m) then
      if v ~= v then return v end
      m = v
    end
    q = q + s
  end
  return m
end]]):format(keep))
  e.lua = exact
  e.loop = byType(function(dt) return numpyLoop(name == 'max' and 'maximum' or 'minimum', dt) end)
  e.numpy = byType(function(dt) return numpyExtreme(e.loop[dt], dt, exact[dt]) end)
  -- the 0-based position of a row's first extreme (or first NaN), in one pass
  e.argLua = apply.perType('arg' .. name, ([[
return function(p, n, s)
  local m, k = p[0], 0
  if m ~= m then return 0 end
  local q = s
  for i = 1, n - 1 do
    local v = p[q]
    if not (v %s m) then
      if v ~= v then return i end
      m, k = v, i
    end
    q = q + s
  end
  return k
end]]):format(keep))
  EXTREMES[name] = e
end

ffi.cdef [[ void *luabridge_memchr(const void *, int, size_t) asm("memchr"); ]]
local memchr, bytes = ffi.C.luabridge_memchr, ffi.typeof('uint8_t *')
-- Rows are searched in chunks of this many elements (the size of the marks buffer).
local FIND_CHUNK = 4096

-- find(p, n, s, m): the 0-based position of the first element of a row equal to m (the first NaN
-- if m is NaN), or nil: numpy's equal (isnan) marks the elements, memchr finds the first mark.
local function numpyFind(dt)
  local equal = numpyLoop('equal', dt, 2, true)
  local isnan = dt.integer or numpyLoop('isnan', dt, 1, true)   -- (integers have no NaN)
  if not (equal and isnan) then return false end
  local size, box, marks = dt.size, ffi.new(dt.ctype .. '[1]'), ffi.new('uint8_t[?]', FIND_CHUNK)
  local function first(p, n, s, m)
    if m == m then
      box[0] = m
      ufunc.binary(equal, n, p, s * size, box, 0, marks, 1)
    else
      ufunc.unary(isnan, n, p, s * size, marks, 1)
    end
    local hit = memchr(marks, 1, n)
    if hit ~= nil then return tonumber(ffi.cast(bytes, hit) - marks) end
  end
  return function(p, n, s, m)
    if n <= FIND_CHUNK then return first(p, n, s, m) end
    for o = 0, n - 1, FIND_CHUNK do
      local k = first(p + o * s, math.min(FIND_CHUNK, n - o), s, m)
      if k then return o + k end
    end
  end
end

-- arg(p, n, s): the 0-based position of the extreme of a row: numpy finds the extreme and its
-- first place, from NUMPY_FROM elements; else one pass in Lua.
local ARGS = {}
for name, e in pairs(EXTREMES) do
  ARGS[name] = byType(function(dt)
    local np, lua, find = e.numpy[dt], e.argLua[dt], numpyFind(dt)
    if not (np and find) then return lua end
    return function(p, n, s)
      if n < K.NUMPY_FROM then return lua(p, n, s) end
      return find(p, n, s, np(p, n, s, p[0])) or lua(p, n, s)
    end
  end)
end

-- first(src, n, inner, m, k): given the extremes m[j] of the slabs src[i * inner + j] (i < n),
-- k[j] = the 1-based position of the first one (of the first NaN where m[j] is NaN), and m[j]
-- that very element. (One branch, seldom taken: a trace recorded while a branch is often taken,
-- as a running extreme's is early on, sends every other iteration through a side exit.)
local FIRST = apply.perType('first', [[
return function(src, n, inner, m, k)
  for j = 0, inner - 1 do k[j] = 0 end
  for i = 0, n - 1 do
    local row = src + i * inner
    for j = 0, inner - 1 do
      local v = row[j]
      if (v == m[j] or v ~= v) and k[j] == 0 then k[j] = i + 1 end
    end
  end
  for j = 0, inner - 1 do m[j] = src[(k[j] - 1) * inner + j] end
end]])

-- The max or min (which) of all of x (not empty).
local function extremeAll(x, which)
  return reduceAll(x, EXTREMES[which], x._st._ptr[x._off])
end

------------------------------------------------------------------------------------------------
-- along a dimension

-- x's elements along dim make rows. They are walked by rows (contiguous rows, or few long
-- ones); by slabs when x is contiguous (outer x n x inner: for each outer position, the n slabs
-- of inner elements fold together elementwise); else elementwise into the result spread along
-- dim. Contiguous layouts (the common case) take loops over plain arguments, no closures.

-- Whether the rows of x along dim are best walked one by one: contiguous, or few and long. (Past
-- this, x._str[dim] of a contiguous x is the element count of the dims after dim.)
local function byRows(x, dim)
  local n = x._sz[dim]
  return x._str[dim] == 1 or n == 1 or (n >= 32 and numel(x) <= 8 * n)
end

-- Whether x's rows along dim follow one another in memory, and out1 and out2 (optional; x's
-- sizes with 1 at dim) are contiguous.
local function packed(x, dim, out1, out2)
  return dim == #x._sz and isContiguous(x) and isContiguous(out1) and (out2 == nil or isContiguous(out2))
end

-- The number of outer positions of a contiguous x around dim (x is outer x n x inner).
local function outerOf(x, dim) return numel(x) / (x._sz[dim] * x._str[dim]) end

-- finish(A, V) for an expression of A (the accumulation) and V, compiled once.
local finishers = {}
local function finisher(expr)
  local f = finishers[expr]
  if not f then
    f = assert(loadstring('return function(A, V) return ' .. expr .. ' end', '=finish'))()
    finishers[expr] = f
  end
  return f
end

-- rp[i] = fin(fold of row i, arg) for packed rows of n elements from xp; cv is C: a number, or
-- a pointer to one per row.
local function foldRow(i, run, fin, arg, xp, n, rp, unit, cv)
  if type(cv) == 'cdata' then cv = cv[i] end
  rp[i] = fin(run(xp + i * n, n, 1, unit, cv), arg)
end

-- foldRows for rows in any layout. (Apart, as making a closure aborts the maker's trace.)
local function foldStridedRows(x, dim, r, run, fin, arg, unit, c)
  local n, s, xp, rp, cp = x._sz[dim], x._str[dim], x._st._ptr, r._st._ptr, isTensor(c) and c._st._ptr
  apply.slices({ x, r, cp and c or nil }, dim, function(ox, o, oc)
    local cv = c
    if oc then cv = cp[oc] end
    rp[o] = fin(run(xp + ox, n, s, unit, cv), arg)
  end)
end

-- r[row] = finish(fold of the row) for each row of x along dim.
local function foldRows(x, dim, r, f, c, finish, arg)
  local run, fin, unit = runOf(f, x), finisher(finish), f.unit
  local perRow = isTensor(c)
  if not packed(x, dim, r, perRow and c or nil) then
    return foldStridedRows(x, dim, r, run, fin, arg, unit, c)
  end
  local cv = perRow and c._st._ptr + c._off or c
  times(numel(r), foldRow, run, fin, arg, x._st._ptr + x._off, x._sz[dim], r._st._ptr + r._off, unit, cv)
end

-- dst = the slabs first..last (inner elements each, contiguous from src) combined elementwise by
-- numpy's binary loop l (add, maximum, ...), in order.
local function combineSlabs(l, size, dst, src, first, last, inner)
  ffi.copy(dst, src + first * inner, inner * size)
  for i = first + 1, last do ufunc.binary(l, inner, dst, size, src + i * inner, size, dst, size) end
end

-- a[j] += b[j] for j < m (a double *, b float *).
local function addFloats(a, b, m) for j = 0, m - 1 do a[j] = a[j] + b[j] end end

-- acc (double[inner]) = the sum of the n slabs from src, by numpy's add: Double slabs straight
-- into acc; Float ones in float32 in groups of FLOAT_GROUP (part, float[inner]), each group's sum
-- then added into acc in double.
local function sumGroup(g, l, src, n, inner, acc, part)
  local first = g * FLOAT_GROUP
  combineSlabs(l, 4, part, src, first, math.min(first + FLOAT_GROUP, n) - 1, inner)
  addFloats(acc, part, inner)
end
local function sumSlabs(o, l, xp, n, inner, acc, part)
  local src, a = xp + o * n * inner, acc + o * inner
  if not part then return combineSlabs(l, 8, a, src, 0, n - 1, inner) end
  times(math.ceil(n / FLOAT_GROUP), sumGroup, l, src, n, inner, a, part)
end

-- acc (outer x inner) = the fold f of contiguous x along dim, slab by slab: Float/Double sums of
-- rows of NUMPY_FROM elements and more through numpy's add, the rest in Lua.
local function foldSlabs(o, kernel, xp, n, inner, acc, cv)
  if type(cv) == 'cdata' then cv = cv + o * inner end
  kernel(xp + o * n * inner, n, inner, acc + o * inner, cv)
end
local function slabsInto(x, dim, f, acc, c)
  local dt, n, inner = x._dt, x._sz[dim], x._str[dim]
  local xp = x._st._ptr + x._off
  if f == SUM and SUM.numpy[dt] and inner >= K.NUMPY_FROM and aligned(x) then
    local part = dt.name == 'Float' and ffi.new('float[?]', inner) or nil
    return times(outerOf(x, dim), sumSlabs, ADD[dt], xp, n, inner, acc, part)
  end
  local perPosition = isTensor(c)
  local cv = perPosition and c._st._ptr + c._off or c
  times(outerOf(x, dim), foldSlabs, f.slabs[perPosition][dt], xp, n, inner, acc, cv)
end

-- r[j] = fin(acc[j], arg) for j < m.
local STORE = apply.perType('store', [[
return function(r, acc, m, fin, arg) for j = 0, m - 1 do r[j] = fin(acc[j], arg) end end]])

-- acc (x's sizes with 1 at dim, accreal) = the fold of x along dim, elementwise into acc
-- spread along dim.
local function foldSpread(x, dim, acc, f, c)
  acc:fill(f.unit)
  local n = x._sz[dim]
  if n == 0 or numel(x) == 0 then return end
  local expr = f.expr:gsub('X', '$2'):gsub('C', isTensor(c) and '$3' or 'v1')
  local body = ('$1 = $1 %s %s'):format(f.op, expr)
  if isTensor(c) then kernel(3, body)(spread(acc, dim, n), x, spread(c, dim, n))
  else kernel(2, body)(spread(acc, dim, n), x, c) end
end

-- r (sizes of x with 1 at dim) = finish(fold f of x along dim), accumulated in accreal.
-- finish is an expression of A (the accumulation) and V (finishArg); C is the number c, or for
-- a tensor c (Double, r's sizes) its element at the row's position.
local function foldDim(x, dim, r, f, c, finish, finishArg)
  finish = finish or 'A'
  local filled = x._sz[dim] > 0 and numel(x) > 0
  if filled and byRows(x, dim) then return foldRows(x, dim, r, f, c, finish, finishArg) end
  if filled and isContiguous(x) and isContiguous(r) and (not isTensor(c) or isContiguous(c)) then
    local m = numel(r)
    local acc = ffi.new(x._dt.integer and 'int64_t[?]' or 'double[?]', m)
    slabsInto(x, dim, f, acc, c)
    return STORE[r._dt](r._st._ptr + r._off, acc, m, finisher(finish), finishArg)
  end
  local acc = r
  if finish ~= 'A' or r._dt.name ~= accName(x._dt) then acc = newTensor(accName(x._dt), r._sz) end
  foldSpread(x, dim, acc, f, c)
  if acc ~= r then kernel(2, '$1 = ' .. finish:gsub('A', '$2'):gsub('V', 'v1'))(r, acc, finishArg) end
end

-- A LongTensor view with x's sizes whose elements hold their 1-based position along dim.
local function positions(x, dim)
  local n = x._sz[dim]
  local iota = torch.LongTensor(n)
  local p = iota._st._ptr
  for i = 0, n - 1 do p[i] = i + 1 end
  local st = {}
  for d = 1, #x._sz do st[d] = 0 end
  st[dim] = 1
  return torch._makeTensor(getmetatable(iota), iota._st, 0, copyArray(x._sz), st)
end

-- vp[i], ip[i] = the extreme of packed row i and its 1-based position.
local function argRow(i, find, xp, n, vp, ip)
  local p = xp + i * n
  local k = find(p, n, 1)
  vp[i], ip[i] = p[k], k + 1
end

-- vals, inds = the extremes of the slabs at outer position o of contiguous x (numpy's loop l)
-- and their positions.
local function argSlabs(o, l, size, first, xp, n, inner, vp, ip)
  local src, m = xp + o * n * inner, vp + o * inner
  combineSlabs(l, size, m, src, 0, n - 1, inner)
  first(src, n, inner, m, ip + o * inner)
end

-- vals, inds = the extremes of the rows of x along dim (any layout) and their positions.
local function argStridedRows(x, dim, vals, inds, find)
  local n, s, xp, vp, ip = x._sz[dim], x._str[dim], x._st._ptr, vals._st._ptr, inds._st._ptr
  apply.slices({ x, vals, inds }, dim, function(ox, ov, oi)
    local k = find(xp + ox, n, s)
    vp[ov], ip[oi] = xp[ox + k * s], k + 1
  end)
end

-- vals, inds (sized) = the extremes (which: 'max' or 'min') of x along dim and their positions.
local function extremeDim(x, dim, vals, inds, which)
  local n = x._sz[dim]
  if numel(x) == 0 then return end
  local e = EXTREMES[which]
  local xp, vp, ip = x._st._ptr, vals._st._ptr, inds._st._ptr
  if byRows(x, dim) then
    local find = aligned(x) and ARGS[which][x._dt] or e.argLua[x._dt]
    if not packed(x, dim, vals, inds) then return argStridedRows(x, dim, vals, inds, find) end
    times(numel(vals), argRow, find, xp + x._off, n, vp + vals._off, ip + inds._off)
  elseif e.numpy[x._dt] and isContiguous(x) and isContiguous(vals) and isContiguous(inds)
      and aligned(x) and aligned(vals) then
    times(outerOf(x, dim), argSlabs, e.loop[x._dt], x._dt.size, FIRST[x._dt], xp + x._off, n,
      x._str[dim], vp + vals._off, ip + inds._off)
  else
    -- slab by slab into the results spread along dim
    vals:copy(x:narrow(dim, 1, 1))
    inds:fill(1)
    kernel(4, e.spreadBody)(spread(vals, dim, n), spread(inds, dim, n), x, positions(x, dim))
  end
end

------------------------------------------------------------------------------------------------
-- scans: r[.., i, ..] = the fold of x[.., 1..i, ..] along dim

local function scanSource(op, unit)
  return ([[
return function(p, n, s, r, t)
  local a, q, o = %s, 0, 0
  for _ = 1, n do
    a = a %s p[q]; r[o] = a
    q = q + s; o = o + t
  end
end]]):format(unit, op)
end

local SCANS = {}
for name, f in pairs({ cumsum = SUM, cumprod = PROD }) do
  SCANS[name] = { fold = f, rows = perClass(name, function(suffix) return scanSource(f.op, f.unit .. suffix) end) }
end

local function scan(name, r, x, dim)
  if numel(x) == 0 then return end
  local sc, n = SCANS[name], x._sz[dim]
  if x._str[dim] == 1 or numel(x) <= 64 * n then
    local run = sc.rows[x._dt]
    local xp, rp, s, t = x._st._ptr, r._st._ptr, x._str[dim], r._str[dim]
    apply.slices({ x, r }, dim, function(ox, o) run(xp + ox, n, s, rp + o, t) end)
    return
  end
  -- walk dim slab by slab, accumulating in accreal
  local f = sc.fold
  local sz = copyArray(x._sz)
  sz[dim] = 1
  local acc = newTensor(accName(x._dt), sz):fill(f.unit)
  local step = kernel(2, ('$1 = $1 %s $2'):format(f.op))
  for i = 1, n do
    step(acc, x:narrow(dim, i, 1))
    r:narrow(dim, i, 1):copy(acc)
  end
end

------------------------------------------------------------------------------------------------
-- norm, var, std

-- The fold and finishing expression of a p-norm (p = 0 counts the non-zeros).
local function pnorm(p)
  if p == 0 then return NONZERO, 'A' end
  if p == 1 then return ABS, 'A' end
  if p == 2 then return SQUARES, 'math.sqrt(A)' end
  return POWABS, 'A ^ (1 / V)'
end

local function normAll(x, p)
  local f, finish = pnorm(p)
  return finisher(finish)(foldAll(x, f, p), p)
end

-- var and std divide the squared deviations by n (biased), else by n - 1.
local SPREAD = { var = 'A / V', std = 'math.sqrt(A / V)' }

local function spreadAll(x, biased, finish)
  local n = numel(x)
  local mean = foldAll(x, SUM) / n
  return finisher(finish)(foldAll(x, SQDEV, mean), biased and n or n - 1)
end

-- two passes (mean, then squared deviations) for accuracy
local function spreadDim(x, dim, r, biased, finish)
  local n = x._sz[dim]
  local mean = newTensor('Double', r._sz)
  foldDim(x, dim, mean, SUM, nil, 'A / V', n)
  foldDim(x, dim, r, SQDEV, mean, finish, biased and n or n - 1)
end

------------------------------------------------------------------------------------------------
-- the ops

-- reduce_all(name, x, p): the reduction of all of x, a Lua number (a boolean for all / any).
local WHOLE = {
  sum = function(x) return foldAll(x, SUM) end,
  prod = function(x) return foldAll(x, PROD) end,
  mean = function(x) return foldAll(x, SUM) / numel(x) end,
  var = function(x, biased) return spreadAll(x, biased, SPREAD.var) end,
  std = function(x, biased) return spreadAll(x, biased, SPREAD.std) end,
  norm = normAll,
  max = function(x) return extremeAll(x, 'max') end,
  min = function(x) return extremeAll(x, 'min') end,
  all = function(x) return foldAll(x, NONZERO) == numel(x) end,
  any = function(x) return foldAll(x, NONZERO) > 0 end,
}

-- reduce_dim(name, r, x, dim, p): r (x's sizes with 1 at dim) = the reduction along dim.
local ALONG = {
  sum = function(x, dim, r) foldDim(x, dim, r, SUM) end,
  prod = function(x, dim, r) foldDim(x, dim, r, PROD) end,
  mean = function(x, dim, r) foldDim(x, dim, r, SUM, nil, 'A / V', x._sz[dim]) end,
  var = function(x, dim, r, biased) spreadDim(x, dim, r, biased, SPREAD.var) end,
  std = function(x, dim, r, biased) spreadDim(x, dim, r, biased, SPREAD.std) end,
  norm = function(x, dim, r, p)
    local f, finish = pnorm(p)
    foldDim(x, dim, r, f, p, finish, p)
  end,
}

local differ = ffi.new('int32_t[1]')

backend.register('cpu', {
  reduce_all = function(name, x, p) return WHOLE[name](x, p) end,
  reduce_dim = function(name, r, x, dim, p) return ALONG[name](x, dim, r, p) end,
  argreduce = function(name, vals, inds, x, dim) return extremeDim(x, dim, vals, inds, name) end,
  scan = scan,
  -- whether a and b (same sizes) hold the same elements
  equal = function(a, b)
    differ[0] = 0
    kernel(2, 'if $1 ~= $2 then v1[0] = 1 end')(a, b, differ)
    return differ[0] == 0
  end,
  minmax = function(x) return extremeAll(x, 'min'), extremeAll(x, 'max') end,
  -- the p-norm of a - b (same element counts), computed in double
  dist = function(a, b, p)
    local d = newTensor('Double', a._sz)
    kernel(3, '$1 = $2 - $3')(d, a, b)
    return normAll(d, p)
  end,
  -- r (x's sizes) = x with each slice along dim whose p-norm exceeds maxnorm scaled to that norm
  renorm = function(r, x, p, dim, maxnorm)
    local scale = kernel(2, '$1 = $2 * v1')
    for i = 1, x._sz[dim] do
      local row, out = x:select(dim, i), r:select(dim, i)
      local norm = normAll(row, p)
      if norm > maxnorm then scale(out, row, maxnorm / (norm + 1e-7))
      elseif r ~= x then out:copy(row) end
    end
  end,
})

return K
