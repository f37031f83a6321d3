-- Reductions, torch7 style: over the whole tensor they return a number; along a dimension they
-- return a tensor keeping that dimension with size 1 (max/min also a LongTensor of 1-based
-- indices). sum prod mean max min trace cumsum cumprod norm renorm dist std var all any equal.
-- The one front end for every device: arguments are parsed and checked here, results sized,
-- then one op of the tensor's backend computes (backend/cpu/reduce.lua, backend/cuda/reduce.lua).
-- The module also returns the helpers the other math files share (argument parsing, results).
local torch = require 'torch.env'
local check = require 'torch.core.check'
local backend = require 'torch.backend'
local apply = require 'torch.core.apply'

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

local function expectTensor(op, x)
  check.error(('%s: expected a tensor, got %s'):format(op, torch.type(x)))
end

-- ([res,] x, ...): the result given (or nil), x and the rest. A tensor before x is a result, as
-- torch7's optional leading result arguments. No loop: this runs on every call.
function R.args1(op, a, b, ...)
  if not isTensor(a) then expectTensor(op, a) end
  if isTensor(b) then return a, b, ... end
  return nil, a, b, ...
end

-- ([res1, res2,] x, ...): as R.args1, with up to two results.
function R.args2(op, a, b, c, ...)
  if not isTensor(a) then expectTensor(op, a) end
  if not isTensor(b) then return nil, nil, a, b, c, ... end
  if not isTensor(c) then return a, nil, b, c, ... end
  return a, b, c, ...
end

-- Result tensors only make sense with a dimension to reduce.
function R.needDim(op, res, dim)
  if dim == nil and res ~= nil then
    check.error(op .. ': a result tensor was given but no dimension to reduce')
  end
end

-- The name of the tensor type of t's device with elements of the CPU type `name` ('Long',
-- 'Byte'): 'LongTensor' or 'CudaLongTensor' (CUDA element types carry their host type).
function R.deviceType(t, name)
  if t._dt.host == nil then return name end
  return name == 'Float' and 'Cuda' or 'Cuda' .. name
end

-- The CPU has no Half arithmetic; the CUDA backend's array module has.
function R.noHalf(op, t)
  if t._dt.half and t._dt.host == nil then
    check.error(op .. ': not available for torch.HalfTensor (convert with :float())')
  end
end

-- The ops torch7 defines for floating-point types only (Float and Double on the CPU).
function R.floating(op, t)
  local dt = t._dt
  if dt.integer or (dt.half and dt.host == nil) then
    local expected = dt.host and 'torch.CudaTensor, torch.CudaDoubleTensor or torch.CudaHalfTensor'
      or 'torch.FloatTensor or torch.DoubleTensor'
    check.error(('%s: expected a %s, got %s'):format(op, expected, torch.typename(t)))
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
  if res == nil then return t.new() end
  check.sameType(op, t, res)
  return res
end

-- t, or a copy of it when it is res or shares res's storage: resizing res would move t's
-- elements (or free them) under the loop that reads them.
function R.apart(res, t)
  if t == res or (t._st ~= nil and t._st == res._st) then return t:clone() end
  return t
end

-- The LongTensor of positions: res, or a new one on x's device (x nil: the CPU).
function R.indexResult(op, res, x)
  local long = x and x._dt.host and 'CudaLong' or 'Long'
  if res == nil then return (long == 'Long' and torch.LongTensor or torch.CudaLongTensor)() end
  check.tensorOf(op, res, 'the index result')
  if res._dt.name ~= long then
    check.error(('%s: the index result must be a torch.%sTensor, got %s'):format(op, long, torch.typename(res)))
  end
  return res
end

-- t's sizes with dimension dim set to n. (Loop-free up to 2 dims: a short loop on every call
-- makes traces abort; lua/torch/README.md, "Kernels".)
function R.sizesWith(t, dim, n)
  local sz = t._sz
  local nd = #sz
  local r
  if nd == 1 then r = { sz[1] } elseif nd == 2 then r = { sz[1], sz[2] } else r = copyArray(sz) end
  r[dim] = n
  return r
end

------------------------------------------------------------------------------------------------
-- max, min, sum, prod, mean

for _, name in ipairs({ 'max', 'min' }) do
  R.define(name, function(...)
    local vals, inds, x, dim = R.args2(name, ...)
    R.noHalf(name, x)
    R.needDim(name, vals, dim)
    if dim == nil then
      if numel(x) == 0 then check.error(name .. ': the tensor has no elements') end
      return backend.of(x).reduce_all(name, x)
    end
    check.dim(name, x, dim)
    if x._sz[dim] == 0 then check.error(('%s: cannot reduce dimension %d of size 0'):format(name, dim)) end
    vals, inds = R.result(name, vals, x), R.indexResult(name, inds, x)
    x = R.apart(vals, R.apart(inds, x))
    local sz = R.sizesWith(x, dim, 1)
    vals:resize(sz)
    inds:resize(sz)
    backend.of(x).argreduce(name, vals, inds, x, dim)
    return vals, inds
  end)
end

-- An op over ([res,] x [,dim]): a number without dim, else a tensor (size 1 at dim).
-- refuse(name, x, dim) refuses what the op does not take.
local function reduction(name, refuse)
  R.define(name, function(...)
    local res, x, dim = R.args1(name, ...)
    refuse(name, x, dim)
    R.needDim(name, res, dim)
    if dim == nil then return backend.of(x).reduce_all(name, x) end
    check.dim(name, x, dim)
    local r = R.result(name, res, x)
    x = R.apart(r, x)
    r:resize(R.sizesWith(x, dim, 1))
    backend.of(x).reduce_dim(name, r, x, dim)
    return r
  end)
end

reduction('sum', R.noHalf)
reduction('prod', R.noHalf)
reduction('mean', function(op, x, dim)
  R.floating(op, x)
  if dim == nil and #x._sz == 0 then check.error('mean: the tensor is empty') end
end)

-- trace(x): the sum of a matrix's diagonal (a view of it, stepping both dims at once).
R.define('trace', function(x)
  check.tensorOf('trace', x)
  R.noHalf('trace', x)
  if #x._sz ~= 2 then check.error(('trace: expected a 2D tensor, got %dD'):format(#x._sz)) end
  local n = math.min(x._sz[1], x._sz[2])
  if n == 0 then return 0 end
  local diagonal = torch._makeTensor(getmetatable(x), x._st, x._off, { n }, { x._str[1] + x._str[2] })
  return backend.of(x).reduce_all('sum', diagonal)
end)

------------------------------------------------------------------------------------------------
-- cumsum, cumprod ([res,] x [,dim = 1])

for _, name in ipairs({ 'cumsum', 'cumprod' }) do
  R.define(name, function(...)
    local res, x, dim = R.args1(name, ...)
    R.noHalf(name, x)
    dim = dim or 1
    check.dim(name, x, dim)
    local r = R.result(name, res, x)
    r:resize(copyArray(x._sz))
    backend.of(x).scan(name, r, x, dim)
    return r
  end)
end

------------------------------------------------------------------------------------------------
-- norm, renorm, dist

-- norm([res,] x [,p = 2] [,dim])
R.define('norm', function(...)
  local res, x, p, dim = R.args1('norm', ...)
  R.floating('norm', x)
  p = p or 2
  check.number('norm', p, 'p')
  R.needDim('norm', res, dim)
  if dim == nil then return backend.of(x).reduce_all('norm', x, p) end
  check.dim('norm', x, dim)
  local r = R.result('norm', res, x)
  x = R.apart(r, x)
  r:resize(R.sizesWith(x, dim, 1))
  backend.of(x).reduce_dim('norm', r, x, dim, p)
  return r
end)

-- Each slice x:select(dim, i) whose p-norm exceeds maxnorm is scaled to norm maxnorm.
local function renorm(res, x, p, dim, maxnorm)
  check.tensorOf('renorm', x, 'input')
  R.floating('renorm', x)
  if res then check.sameType('renorm', x, res) else res = x.new() end
  check.number('renorm', p, 'p')
  check.number('renorm', maxnorm, 'maxnorm')
  if p <= 0 then check.error('renorm: the norm must be positive, got p = ' .. p) end
  if #x._sz < 2 then check.error(('renorm: expected at least 2 dimensions, got %dD'):format(#x._sz)) end
  check.dim('renorm', x, dim)
  if res ~= x then
    x = R.apart(res, x)
    res:resizeAs(x)
  end
  backend.of(x).renorm(res, x, p, dim, maxnorm)
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
  return backend.of(a).dist(a, b, p)
end)

------------------------------------------------------------------------------------------------
-- var, std: ([res,] x [,dim] [,biased = false]); biased divides by n, else by n - 1

for _, name in ipairs({ 'var', 'std' }) do
  R.define(name, function(...)
    local res, x, dim, biased = R.args1(name, ...)
    R.floating(name, x)
    if type(dim) == 'boolean' or dim == nil then
      R.needDim(name, res, nil)
      return backend.of(x).reduce_all(name, x, dim)
    end
    check.dim(name, x, dim)
    local r = R.result(name, res, x)
    x = R.apart(r, x)
    r:resize(R.sizesWith(x, dim, 1))
    backend.of(x).reduce_dim(name, r, x, dim, biased)
    return r
  end)
end

------------------------------------------------------------------------------------------------
-- all, any (ByteTensor), equal

for _, name in ipairs({ 'all', 'any' }) do
  R.define(name, function(x)
    check.tensorOf(name, x)
    if x._dt.name ~= R.deviceType(x, 'Byte') then
      check.error(('%s: expected a torch.%sTensor, got %s'):format(name, R.deviceType(x, 'Byte'), torch.typename(x)))
    end
    return backend.of(x).reduce_all(name, x)
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
  return backend.of(a).equal(a, b)
end)

return R
