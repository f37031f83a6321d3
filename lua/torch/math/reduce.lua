-- Reductions, torch7 style: over the whole tensor they return a number; along a dimension they
-- return a tensor keeping that dimension with size 1 (max/min also a LongTensor of 1-based
-- indices). sum prod mean max min cumsum cumprod norm renorm dist std var all any equal.
-- The module also returns the helpers the other math files share (argument parsing, results,
-- row kernels).
local ffi = require 'ffi'
local torch = require 'torch.env'
local check = require 'torch.check'
local apply = require 'torch.backend.cpu.apply'

local isTensor, numel, sameSizes = torch.isTensor, apply.numel, apply.sameSizes
local R = {}

local function copyArray(a) local r = {} for i = 1, #a do r[i] = a[i] end return r end

------------------------------------------------------------------------------------------------
-- shared helpers

-- Installs fn as the method `name` of every CPU tensor type and as torch.name; a tensor of
-- another backend (it carries _device) goes to its own method.
function R.define(name, fn)
  torch._method(name, fn)
  torch[name] = function(a, ...)
    if torch.isTensor(a) and a._device then return a[name](a, ...) end
    return fn(a, ...)
  end
end

-- ([res1, ..., resk,] x, ...): the results given (a table, nil where absent), x and the rest.
-- Tensors before x are results, as torch7's optional leading result arguments.
function R.split(op, k, ...)
  local lead = 0
  while lead <= k and isTensor((select(lead + 1, ...))) do lead = lead + 1 end
  if lead == 0 then check.error(('%s: expected a tensor, got %s'):format(op, torch.type((...)))) end
  local res = {}
  for i = 1, lead - 1 do res[i] = (select(i, ...)) end
  return res, select(lead, ...)
end

-- Result tensors only make sense with a dimension to reduce.
function R.needDim(op, res, dim)
  if dim == nil and #res > 0 then
    check.error(op .. ': a result tensor was given but no dimension to reduce')
  end
end

function R.noHalf(op, t)
  if t._dt.half then check.error(op .. ': not available for torch.HalfTensor (convert with :float())') end
end

-- The ops torch7 defines for Float and Double tensors only.
function R.floating(op, t)
  if t._dt.integer or t._dt.half then
    check.error(('%s: expected a torch.FloatTensor or torch.DoubleTensor, got %s'):format(op, torch.typename(t)))
  end
end

function R.long(op, t, what)
  check.tensorOf(op, t, what)
  if t._dt.name ~= 'Long' then
    check.error(('%s: %s must be a torch.LongTensor, got %s'):format(op, what, torch.typename(t)))
  end
end

-- The result: res (checked to be of t's type) or a new tensor of that type.
function R.result(op, res, t)
  if res == nil then return t:new() end
  check.sameType(op, t, res)
  return res
end

function R.indexResult(op, res)
  if res == nil then return torch.LongTensor() end
  R.long(op, res, 'the index result')
  return res
end

-- A new tensor of type name ('Double', ...) and sizes (a table or LongStorage; the constructor
-- would take a table as contents and a LongStorage as the storage of a LongTensor).
function R.new(name, sizes) return torch[name .. 'Tensor']():resize(sizes) end

-- t's sizes with dimension dim set to n.
function R.sizesWith(t, dim, n)
  local sz = copyArray(t._sz)
  sz[dim] = n
  return sz
end

-- A view of t (size 1 at dim) repeating it n times along dim (stride 0).
function R.spread(t, dim, n)
  local sz, st = copyArray(t._sz), copyArray(t._str)
  sz[dim], st[dim] = n, 0
  return torch._makeTensor(getmetatable(t), t._st, t._off, sz, st)
end

-- Calls fn(p, n, s) for 1-D runs covering all of t's elements, in no particular order: p points
-- at a run's first element, which has n elements at stride s. The dims are ordered by decreasing
-- stride (for locality) and merged where the layout allows.
function R.rows(t, fn)
  local total = numel(t)
  if total == 0 then return end
  local ptr = t._st._ptr
  if apply.isContiguous(t) then return fn(ptr + t._off, total, 1) end
  local nd = #t._sz
  local order = {}
  for d = 1, nd do order[d] = d end
  table.sort(order, function(a, b) return math.abs(t._str[a]) > math.abs(t._str[b]) end)
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
  if m == 1 then return fn(ptr + t._off, sz[1], st[1]) end
  local n, s = sz[m], st[m]
  apply.slices({ { _sz = sz, _str = st, _off = t._off } }, m, function(o) fn(ptr + o, n, s) end)
end

-- Row kernels: Lua source compiled once per element type, so each gets its own traces.
local compiled = {}
function R.rowKernel(src, dt)
  local byType = compiled[src]
  if not byType then byType = {}; compiled[src] = byType end
  local f = byType[dt.id]
  if not f then
    f = assert(loadstring(src, '=rowkernel'))()
    byType[dt.id] = f
  end
  return f
end

-- apply.kernel runners by body, made on first use.
local runners = {}
function R.kernel(n, body)
  local key = n .. body
  local k = runners[key]
  if not k then k = apply.kernel(n, body); runners[key] = k end
  return k
end

-- The type accumulations run in: torch7's accreal (long for integers, double for floats).
local function accName(dt) return dt.integer and 'Long' or 'Double' end

------------------------------------------------------------------------------------------------
-- folds: a = a OP f(x) over elements; f is an expression of X (the element) and C (a scalar)

-- Four accumulators make independent chains that the CPU overlaps.
local function foldSource(fold, integer)
  local unit = fold.unit .. (integer and 'LL' or '')
  local expr = fold.expr:gsub('X', 'v'):gsub('C', 'c')
  local step = {}
  for k, at in ipairs({ 'q', 'q + s', 'q + s2', 'q + s3' }) do
    step[k] = ('do local v = p[%s]; a%d = a%d %s %s end'):format(at, k - 1, k - 1, fold.op, expr)
  end
  return ([[
return function(p, n, s, a0, c)
  local a1, a2, a3 = %s, %s, %s
  local q, s2, s3, s4 = 0, 2 * s, 3 * s, 4 * s
  for _ = 1, (n - n %% 4) / 4 do
    %s %s %s %s
    q = q + s4
  end
  for _ = 1, n %% 4 do
    local v = p[q]; a0 = a0 %s %s
    q = q + s
  end
  return (a0 %s a1) %s (a2 %s a3)
end]]):format(unit, unit, unit, step[1], step[2], step[3], step[4], fold.op, expr,
    fold.op, fold.op, fold.op)
end

local function foldKernel(fold, dt)
  local key = dt.integer and 'intSrc' or 'src'
  if not fold[key] then fold[key] = foldSource(fold, dt.integer) end
  return R.rowKernel(fold[key], dt)
end

local SUM = { op = '+', unit = 0, expr = 'X' }
local PROD = { op = '*', unit = 1, expr = 'X' }
local SQUARES = { op = '+', unit = 0, expr = 'X * X' }
local SQDEV = { op = '+', unit = 0, expr = '(X - C) * (X - C)' }
local NONZERO = { op = '+', unit = 0, expr = '(X ~= 0 and 1 or 0)' }
local ABS = { op = '+', unit = 0, expr = 'math.abs(X)' }
local POWABS = { op = '+', unit = 0, expr = 'math.abs(X) ^ C' }
R.SUM, R.NONZERO = SUM, NONZERO

-- The fold over all of x, as a Lua number.
local function foldAll(x, fold, c)
  local f = foldKernel(fold, x._dt)
  local a = fold.unit
  R.rows(x, function(p, n, s) a = f(p, n, s, a, c) end)
  return tonumber(a)
end
R.foldAll = foldAll

-- r (sizes of x with 1 at dim) = finish(fold of x along dim). The accumulation runs in the
-- accreal type; finish is a body over ($1 = r, $2 = accumulator) with v1 = finishArg. C is the
-- number c, or for a tensor c (Double, r's sizes) the element of c of the row's position.
local function foldDim(x, dim, r, fold, c, finish, finishArg)
  local acc = r
  if finish or r._dt.name ~= accName(x._dt) then acc = R.new(accName(x._dt), r._sz) end
  acc:fill(fold.unit)
  local n = x._sz[dim]
  local perRow = isTensor(c)
  if n > 0 and numel(x) > 0 then
    if n >= 32 and (x._str[dim] == 1 or numel(x) <= 8 * n) then
      -- long rows: one register-accumulated fold per row
      local f = foldKernel(fold, x._dt)
      local xp, ap, s, unit = x._st._ptr, acc._st._ptr, x._str[dim], fold.unit
      if perRow then
        local cp = c._st._ptr
        apply.slices({ x, acc, c }, dim, function(ox, oa, oc) ap[oa] = f(xp + ox, n, s, unit, cp[oc]) end)
      else
        apply.slices({ x, acc }, dim, function(ox, oa) ap[oa] = f(xp + ox, n, s, unit, c) end)
      end
    else
      -- short or strided rows: accumulate elementwise into the result spread along dim
      local expr = fold.expr:gsub('X', '$2'):gsub('C', perRow and '$3' or 'v1')
      local body = ('$1 = $1 %s %s'):format(fold.op, expr)
      if perRow then R.kernel(3, body)(R.spread(acc, dim, n), x, R.spread(c, dim, n))
      else R.kernel(2, body)(R.spread(acc, dim, n), x, c) end
    end
  end
  if acc ~= r then R.kernel(2, finish or '$1 = $2')(r, acc, finishArg) end
end

------------------------------------------------------------------------------------------------
-- max and min: torch7 keeps the first extreme and lets a NaN win (the first NaN)

-- The running extreme m over a row, branch by branch; returns at once with a NaN.
local function extremeSource(keep)
  return ([[
return function(p, n, s, m)
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
end]]):format(keep)
end

-- The same without branches (math.max/min compile to single instructions) for elements read as
-- Lua numbers; z turns NaN when a NaN (or an infinity) is met, and then the caller reruns the
-- exact version above.
local function fastExtremeSource(pick)
  return ([[
local pick = math.%s
return function(p, n, s, m0)
  local m1, m2, m3, z = m0, m0, m0, 0
  local q, s2, s3, s4 = 0, 2 * s, 3 * s, 4 * s
  for _ = 1, (n - n %% 4) / 4 do
    local v0, v1, v2, v3 = p[q], p[q + s], p[q + s2], p[q + s3]
    m0 = pick(m0, v0); m1 = pick(m1, v1); m2 = pick(m2, v2); m3 = pick(m3, v3)
    z = z + (v0 + v1 + v2 + v3) * 0
    q = q + s4
  end
  for _ = 1, n %% 4 do
    local v = p[q]
    m0 = pick(m0, v); z = z + v * 0
    q = q + s
  end
  return pick(pick(m0, m1), pick(m2, m3)), z
end]]):format(pick)
end

-- The extreme of a row and its 0-based position.
local function argExtremeSource(keep)
  return ([[
return function(p, n, s)
  local m, k = p[0], 0
  if m ~= m then return m, 0 end
  local q = s
  for i = 1, n - 1 do
    local v = p[q]
    if not (v %s m) then
      m, k = v, i
      if v ~= v then break end
    end
    q = q + s
  end
  return m, k
end]]):format(keep)
end

local function extremeAll(op, x, keep)
  if numel(x) == 0 then check.error(op .. ': the tensor has no elements') end
  local exact = R.rowKernel(extremeSource(keep), x._dt)
  local fast = not x._dt.int64 and R.rowKernel(fastExtremeSource(keep == '<=' and 'max' or 'min'), x._dt)
  local m = x._st._ptr[x._off]
  R.rows(x, function(p, n, s)
    if m ~= m then return end
    if fast then
      local r, z = fast(p, n, s, m)
      if z == z then m = r; return end
    end
    m = exact(p, n, s, m)
  end)
  return tonumber(m)
end
R.extremeAll = extremeAll

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

local function extremeDim(op, x, dim, vals, inds, keep)
  local n = x._sz[dim]
  if n == 0 then check.error(('%s: cannot reduce dimension %d of size 0'):format(op, dim)) end
  local sz = R.sizesWith(x, dim, 1)
  vals:resize(sz)
  inds:resize(sz)
  if numel(x) == 0 then return end
  if n >= 32 and (x._str[dim] == 1 or numel(x) <= 8 * n) then
    local f = R.rowKernel(argExtremeSource(keep), x._dt)
    local xp, vp, ip, s = x._st._ptr, vals._st._ptr, inds._st._ptr, x._str[dim]
    apply.slices({ x, vals, inds }, dim, function(ox, ov, oi)
      local m, k = f(xp + ox, n, s)
      vp[ov] = m
      ip[oi] = k + 1
    end)
  else
    vals:copy(x:narrow(dim, 1, 1))
    inds:fill(1)
    R.kernel(4, ('if not ($3 %s $1) and $1 == $1 then $1 = $3; $2 = $4 end'):format(keep))(
      R.spread(vals, dim, n), R.spread(inds, dim, n), x, positions(x, dim))
  end
end

for name, keep in pairs({ max = '<=', min = '>=' }) do
  R.define(name, function(...)
    local res, x, dim = R.split(name, 2, ...)
    R.noHalf(name, x)
    R.needDim(name, res, dim)
    if dim == nil then return extremeAll(name, x, keep) end
    check.dim(name, x, dim)
    local vals, inds = R.result(name, res[1], x), R.indexResult(name, res[2])
    extremeDim(name, x, dim, vals, inds, keep)
    return vals, inds
  end)
end

------------------------------------------------------------------------------------------------
-- sum, prod, mean

-- An op over ([res,] x [,dim]): a number without dim, else a tensor (size 1 at dim).
local function reduction(name, floatOnly, whole, alongDim)
  R.define(name, function(...)
    local res, x, dim = R.split(name, 1, ...)
    R.noHalf(name, x)
    if floatOnly then R.floating(name, x) end
    R.needDim(name, res, dim)
    if dim == nil then return whole(x) end
    check.dim(name, x, dim)
    local r = R.result(name, res[1], x)
    r:resize(R.sizesWith(x, dim, 1))
    alongDim(x, dim, r)
    return r
  end)
end

reduction('sum', false, function(x) return foldAll(x, SUM) end,
  function(x, dim, r) foldDim(x, dim, r, SUM) end)
reduction('prod', false, function(x) return foldAll(x, PROD) end,
  function(x, dim, r) foldDim(x, dim, r, PROD) end)
reduction('mean', true,
  function(x)
    if #x._sz == 0 then check.error('mean: the tensor is empty') end
    return foldAll(x, SUM) / numel(x)
  end,
  function(x, dim, r) foldDim(x, dim, r, SUM, nil, '$1 = $2 / v1', x._sz[dim]) end)

------------------------------------------------------------------------------------------------
-- cumsum, cumprod ([res,] x [,dim = 1])

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

for name, fold in pairs({ cumsum = SUM, cumprod = PROD }) do
  R.define(name, function(...)
    local res, x, dim = R.split(name, 1, ...)
    R.noHalf(name, x)
    dim = dim or 1
    check.dim(name, x, dim)
    local r = R.result(name, res[1], x)
    r:resize(copyArray(x._sz))
    local n = x._sz[dim]
    if numel(x) == 0 then return r end
    if x._str[dim] == 1 or numel(x) <= 64 * n then
      local f = R.rowKernel(scanSource(fold.op, fold.unit .. (x._dt.integer and 'LL' or '')), x._dt)
      local xp, rp, s, t = x._st._ptr, r._st._ptr, x._str[dim], r._str[dim]
      apply.slices({ x, r }, dim, function(ox, o) f(xp + ox, n, s, rp + o, t) end)
    else
      -- walk dim slab by slab, accumulating in accreal
      local acc = R.new(accName(x._dt), R.sizesWith(x, dim, 1)):fill(fold.unit)
      local step = R.kernel(2, ('$1 = $1 %s $2'):format(fold.op))
      for i = 1, n do
        step(acc, x:narrow(dim, i, 1))
        r:narrow(dim, i, 1):copy(acc)
      end
    end
    return r
  end)
end

------------------------------------------------------------------------------------------------
-- norm, renorm, dist

-- The fold and finishing step of a p-norm (p = 0 counts the non-zeros).
local function pnorm(p)
  if p == 0 then return NONZERO, nil end
  if p == 1 then return ABS, nil end
  if p == 2 then return SQUARES, '$1 = math.sqrt($2)' end
  return POWABS, '$1 = $2 ^ v1'
end

local function normAll(x, p)
  local fold = pnorm(p)
  local a = foldAll(x, fold, p)
  if p == 0 or p == 1 then return a end
  if p == 2 then return math.sqrt(a) end
  return a ^ (1 / p)
end

-- norm([res,] x [,p = 2] [,dim])
R.define('norm', function(...)
  local res, x, p, dim = R.split('norm', 1, ...)
  R.floating('norm', x)
  p = p or 2
  check.number('norm', p, 'p')
  R.needDim('norm', res, dim)
  if dim == nil then return normAll(x, p) end
  check.dim('norm', x, dim)
  local r = R.result('norm', res[1], x)
  r:resize(R.sizesWith(x, dim, 1))
  local fold, finish = pnorm(p)
  foldDim(x, dim, r, fold, p, finish or '$1 = $2', 1 / p)
  return r
end)

-- Each slice x:select(dim, i) whose p-norm exceeds maxnorm is scaled to norm maxnorm.
local function renorm(res, x, p, dim, maxnorm)
  check.tensorOf('renorm', x, 'input')
  R.floating('renorm', x)
  if res then check.sameType('renorm', x, res) else res = x:new() end
  check.number('renorm', p, 'p')
  check.number('renorm', maxnorm, 'maxnorm')
  if p <= 0 then check.error('renorm: the norm must be positive, got p = ' .. p) end
  if #x._sz < 2 then check.error(('renorm: expected at least 2 dimensions, got %dD'):format(#x._sz)) end
  check.dim('renorm', x, dim)
  if res ~= x then res:resizeAs(x) end
  local scale = R.kernel(2, '$1 = $2 * v1')
  for i = 1, x._sz[dim] do
    local row, out = x:select(dim, i), res:select(dim, i)
    local norm = normAll(row, p)
    if norm > maxnorm then scale(out, row, maxnorm / (norm + 1e-7))
    elseif res ~= x then out:copy(row) end
  end
  return res
end

-- x:renorm(p, dim, maxnorm) works in place; res:renorm(x, p, dim, maxnorm) writes res.
torch._method('renorm', function(self, a, ...)
  if isTensor(a) then return renorm(self, a, ...) end
  return renorm(self, self, a, ...)
end)
-- torch.renorm([res,] x, p, dim, maxnorm)
torch.renorm = function(a, b, ...)
  if isTensor(b) then return renorm(a, b, ...) end
  return renorm(nil, a, b, ...)
end

-- dist(a, b [,p = 2]): the p-norm of a - b.
R.define('dist', function(a, b, p)
  check.tensorOf('dist', a, 'first argument')
  check.tensorOf('dist', b, 'second argument')
  R.floating('dist', a)
  check.sameType('dist', a, b)
  check.sameElements('dist', a, b)
  p = p or 2
  check.number('dist', p, 'p')
  local d = R.new('Double', a._sz)
  R.kernel(3, '$1 = $2 - $3')(d, a, b)
  return normAll(d, p)
end)

------------------------------------------------------------------------------------------------
-- var, std: ([res,] x [,dim] [,biased = false]); biased divides by n, else by n - 1

local function spreadOf(name, sqrtOf)
  local function whole(x, biased)
    local n = numel(x)
    local mean = foldAll(x, SUM) / n
    local v = foldAll(x, SQDEV, mean) / (biased and n or n - 1)
    return sqrtOf and math.sqrt(v) or v
  end
  R.define(name, function(...)
    local res, x, dim, biased = R.split(name, 1, ...)
    R.floating(name, x)
    if type(dim) == 'boolean' or dim == nil then
      R.needDim(name, res, nil)
      return whole(x, dim)
    end
    check.dim(name, x, dim)
    local r = R.result(name, res[1], x)
    r:resize(R.sizesWith(x, dim, 1))
    local n = x._sz[dim]
    -- two passes (mean, then squared deviations) for accuracy
    local mean = R.new('Double', r._sz)
    foldDim(x, dim, mean, SUM, nil, '$1 = $2 / v1', n)
    foldDim(x, dim, r, SQDEV, mean, sqrtOf and '$1 = math.sqrt($2 / v1)' or '$1 = $2 / v1',
      biased and n or n - 1)
    return r
  end)
end
spreadOf('var', false)
spreadOf('std', true)

------------------------------------------------------------------------------------------------
-- all, any (ByteTensor), equal

for name, test in pairs({
  all = function(count, n) return count == n end,
  any = function(count) return count > 0 end,
}) do
  R.define(name, function(x)
    check.tensorOf(name, x)
    if x._dt.name ~= 'Byte' then
      check.error(('%s: expected a torch.ByteTensor, got %s'):format(name, torch.typename(x)))
    end
    return test(foldAll(x, NONZERO), numel(x))
  end)
end

-- True when a and b have the same sizes and elements.
R.define('equal', function(a, b)
  check.tensorOf('equal', a, 'first argument')
  check.tensorOf('equal', b, 'second argument')
  R.noHalf('equal', a)
  check.sameType('equal', a, b)
  if not sameSizes(a, b) then return false end
  if numel(a) == 0 then return true end
  local differ = ffi.new('int32_t[1]')
  R.kernel(2, 'if $1 ~= $2 then v1[0] = 1 end')(a, b, differ)
  return differ[0] == 0
end)

return R
