-- Constructors and structural copies: zeros ones range linspace logspace eye diag tril triu
-- reshape repeatTensor cross, as torch7 (method and torch.f forms). Most are fills, copies and
-- views (any device); the sequences and cross products are ops of the backend
-- (backend/cpu/construct.lua).
local torch = require 'torch.env'
local check = require 'torch.core.check'
local backend = require 'torch.backend'
local apply = require 'torch.core.apply'
local overlaps = require('torch.math.blas').overlaps

local isTensor = torch.isTensor
local numel = apply.numel

-- torch7's optional leading result: it is given when argument n + 1 is a tensor too.
local function optionalResult(n, first, ...)
  if isTensor((select(n, ...))) then return first, ... end
  return nil, first, ...
end

local function integer(op, x, name)
  check.number(op, x, name)
  if not check.isInt(x) then check.error(('%s: %s must be an integer, got %s'):format(op, name, tostring(x))) end
  return x
end

-- A view of t's elements from element offset off (0-based, from t's own) with sizes/strides.
local function viewOf(t, off, sz, str)
  return torch._makeTensor(getmetatable(t), t._st, t._off + off, sz, str)
end

-- The arguments of op([res,] x, sizes): res or nil, x, and the sizes as a table.
local function tensorAndSizes(op, ...)
  local r, t = optionalResult(1, ...)
  check.tensorOf(op, t)
  return r, t, torch._sizesFrom(op, select(r and 3 or 2, ...))
end

-- The result of op on t: r, or a new tensor of t's type; t is copied when r shares its memory.
local function resultFor(op, r, t)
  r = r or t.new()
  check.sameType(op, r, t)
  if r == t or overlaps(r, t) then t = t:clone() end   -- r is resized before t is read
  return r, t
end

-- Installs f as the method x:name(...) and as torch.name(...).
local function define(name, f)
  torch._method(name, f)
  torch[name] = f
end

-- A new result tensor and the arguments: torch7's torch.f(..., 'torch.FloatTensor') takes the
-- type from a last argument naming a tensor type (and drops it), else the default type.
local function resultAndArgs(...)
  local n = select('#', ...)
  local last = select(n, ...)
  local mt = type(last) == 'string' and torch.getmetatable(last)
  if mt and rawget(mt, '__tensor') then return mt.__constructor(), unpack({ ... }, 1, n - 1) end
  return torch.Tensor(), ...
end

-- Installs r:name(...) and torch.name([r,] ... [, typeName]), where r defaults to a new tensor.
local function constructor(name, method)
  torch._method(name, method)
  torch[name] = function(a, ...)
    if isTensor(a) then return method(a, ...) end
    return method(resultAndArgs(a, ...))
  end
end

------------------------------------------------------------------------------------------------
-- zeros, ones: x:zeros(sizes) resizes x; torch.zeros([res,] sizes) makes a default-type tensor

local function filled(name, value)
  constructor(name, function(r, ...)
    r:resize(torch._sizesFrom(name, ...))
    return r:fill(value)
  end)
end
filled('zeros', 0)
filled('ones', 1)

------------------------------------------------------------------------------------------------
-- range, linspace, logspace: r's elements in row-major order (r resized to n elements unless it
-- has n already), computed in a DoubleTensor by the CPU's sequence op and copied (any type,
-- strides and device)

local function sequence(name, count)
  constructor(name, function(r, ...)
    local n, a, b = count(...)
    if numel(r) ~= n then r:resize(n) end
    local tmp = torch.DoubleTensor(n)
    backend.of(tmp).sequence(name, tmp, a, b)
    return r:copy(tmp)
  end)
end

sequence('range', function(xmin, xmax, step)
  check.number('range', xmin, 'xmin')
  check.number('range', xmax, 'xmax')
  step = step or 1
  check.number('range', step, 'step')
  if step == 0 then check.error('range: step must be a non-null number') end
  if (step > 0 and xmax < xmin) or (step < 0 and xmax > xmin) then
    check.error(('range: upper bound %s and lower bound %s incoherent with step sign %s'):format(xmax, xmin, step))
  end
  return math.floor((xmax - xmin) / step + 1), xmin, step
end)

local function points(op)
  return function(a, b, n)
    check.number(op, a, 'start')
    check.number(op, b, 'end')
    n = integer(op, check.truncate(n or 100), 'number of points')
    if not (n > 1 or (n == 1 and a == b)) then
      check.error(('%s: invalid number of points %d (from %s to %s)'):format(op, n, a, b))
    end
    return n, a, b
  end
end

sequence('linspace', points('linspace'))
sequence('logspace', points('logspace'))

------------------------------------------------------------------------------------------------
-- eye([res,] n [, m])

constructor('eye', function(r, n, m)
  integer('eye', n, 'n')
  if n < 1 then check.error('eye: n must be positive, got ' .. n) end
  m = m or 0
  integer('eye', m, 'm')
  if m <= 0 then m = n end
  r:resize(n, m):zero()
  viewOf(r, 0, { math.min(n, m) }, { r._str[1] + r._str[2] }):fill(1)
  return r
end)

------------------------------------------------------------------------------------------------
-- diag([res,] x [, k]): the k-th diagonal of a matrix, or the matrix with vector x on it

local function diag(...)
  local r, t, k = optionalResult(1, ...)
  check.tensorOf('diag', t)
  k = integer('diag', k or 0, 'k')
  r, t = resultFor('diag', r, t)
  local nd = #t._sz
  if nd == 1 then
    local n = t._sz[1]
    local size = n + math.abs(k)
    r:resize(size, size):zero()
    local s1, s2 = r._str[1], r._str[2]
    if n > 0 then viewOf(r, k >= 0 and k * s2 or -k * s1, { n }, { s1 + s2 }):copy(t) end
  elseif nd == 2 then
    local rows, cols = t._sz[1], t._sz[2]
    local s1, s2 = t._str[1], t._str[2]
    local n = math.max(0, k >= 0 and math.min(rows, cols - k) or math.min(rows + k, cols))
    r:resize(n)
    if n > 0 then r:copy(viewOf(t, k >= 0 and k * s2 or -k * s1, { n }, { s1 + s2 })) end
  else
    check.error(('diag: matrix or a vector expected, got a %dD tensor'):format(nd))
  end
  return r
end
define('diag', diag)

------------------------------------------------------------------------------------------------
-- tril / triu([res,] x [, k]): x with the elements above (below) the k-th diagonal zeroed

local function triangle(name, keepBelow)
  local function f(...)
    local r, t, k = optionalResult(1, ...)
    check.tensorOf(name, t)
    k = integer(name, k or 0, 'k')
    if #t._sz ~= 2 then check.error(('%s: expected a matrix, got a %dD tensor'):format(name, #t._sz)) end
    r = r or t.new()
    check.sameType(name, r, t)
    if r ~= t then
      if overlaps(r, t) then t = t:clone() end
      r:resizeAs(t):copy(t)
    end
    local rows, cols = t._sz[1], t._sz[2]
    for i = 1, rows do
      -- tril keeps columns <= i + k of row i, triu keeps columns >= i + k
      local first, last
      if keepBelow then first, last = math.max(1, i + k + 1), cols
      else first, last = 1, math.min(cols, i + k - 1) end
      if last >= first then r:select(1, i):narrow(1, first, last - first + 1):zero() end
    end
    return r
  end
  define(name, f)
end
triangle('tril', true)
triangle('triu', false)

------------------------------------------------------------------------------------------------
-- reshape([res,] x, sizes): a copy of x's elements with new sizes

local function reshape(...)
  local r, t, sz = tensorAndSizes('reshape', ...)
  local n = #sz > 0 and 1 or 0
  for d = 1, #sz do n = n * sz[d] end
  if n ~= numel(t) then
    check.error(('reshape: size %s (%d elements) does not match tensor %s (%d elements)'):format(
      check.sizes(sz), n, check.sizestr(t), numel(t)))
  end
  r, t = resultFor('reshape', r, t)
  return r:resize(sz):copy(t)
end
define('reshape', reshape)

------------------------------------------------------------------------------------------------
-- repeatTensor([res,] x, sizes): x tiled sizes[d] times along each dim (leading dims added)

local function repeatTensor(...)
  local r, t, times = tensorAndSizes('repeatTensor', ...)
  local nd = #times
  if nd < #t._sz then
    check.error(('repeatTensor: %d repeat counts for a %dD tensor; give at least one per dimension'):format(nd, #t._sz))
  end
  if numel(t) == 0 then check.error('repeatTensor: the tensor to repeat has no elements (size ' .. check.sizestr(t) .. ')') end
  r, t = resultFor('repeatTensor', r, t)
  local xsize, rsize = {}, {}
  for d = 1, nd do
    xsize[d] = t._sz[d - (nd - #t._sz)] or 1
    rsize[d] = xsize[d] * times[d]
  end
  r:resize(rsize)
  if numel(r) == 0 then return r end
  -- r seen as times[1] x ... x times[nd] blocks of xsize each, all copied from x
  local blocks = r
  for d = 1, nd do blocks = blocks:unfold(d, xsize[d], xsize[d]) end
  local src = t:contiguous():view(xsize)
  local wide = {}
  for d = 1, nd do wide[d], wide[nd + d] = 1, xsize[d] end
  blocks:copy(src:view(wide):expand(blocks._sz))
  return r
end
define('repeatTensor', repeatTensor)

------------------------------------------------------------------------------------------------
-- cross([res,] a, b [, dim]): cross products along dim (default: the first of size 3)

local function cross(...)
  local r, a, b, dim = optionalResult(2, ...)
  check.tensorOf('cross', a)
  check.tensorOf('cross', b)
  check.sameType('cross', a, b)
  if a._dt.half then check.error('cross: not supported for torch.HalfTensor') end
  if #a._sz ~= #b._sz then check.error(('cross: inconsistent tensor dimension %dD, %dD'):format(#a._sz, #b._sz)) end
  if not apply.sameSizes(a, b) then
    check.error(('cross: inconsistent tensor sizes %s, %s'):format(check.sizestr(a), check.sizestr(b)))
  end
  if dim == nil then
    for d = 1, #a._sz do if a._sz[d] == 3 then dim = d; break end end
    if dim == nil then check.error('cross: no dimension of size 3 in ' .. check.sizestr(a)) end
  end
  check.dim('cross', a, dim)
  if a._sz[dim] ~= 3 then check.error(('cross: dimension %d does not have size 3 (%s)'):format(dim, check.sizestr(a))) end
  r, a = resultFor('cross', r, a)
  if overlaps(r, b) then b = b:clone() end
  r:resizeAs(a)
  backend.of(r).cross(r, a, b, dim)
  return r
end
define('cross', cross)
