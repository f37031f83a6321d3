-- Joining and splitting, torch7 style: cat, split, chunk (views and copies: any device); and
-- histograms: histc, bhistc (counted by the backend's histc op: CPU only).
local ffi = require 'ffi'
local torch = require 'torch.env'
local check = require 'torch.core.check'
local backend = require 'torch.backend'
local R = require 'torch.math.reduce'

local isTensor, numel = torch.isTensor, require('torch.core.apply').numel

------------------------------------------------------------------------------------------------
-- cat

-- The size of input t in dimension d of the result: its own, 1 past its last dimension, and 0
-- for an empty (0D) tensor, which takes no part.
local function extent(t, d)
  if d <= #t._sz then return t._sz[d] end
  return #t._sz > 0 and 1 or 0
end

-- Joins the tensors of list along dim (nil or -1: the last dimension over all inputs). Inputs
-- with fewer dimensions count as having trailing size-1 ones; empty ones are skipped.
local function catList(res, list, dim)
  if #list == 0 then check.error('cat: expected a non-empty list of tensors') end
  for i = 1, #list do
    if not isTensor(list[i]) then
      check.error(('cat: expected tensors, got %s at position %d'):format(torch.type(list[i]), i))
    end
    check.sameType('cat', list[1], list[i])
  end
  res = R.result('cat', res, list[1])
  local nd = 0
  for i = 1, #list do nd = math.max(nd, #list[i]._sz) end
  if dim == nil or dim == -1 then
    dim = math.max(nd, 1)
  elseif not check.isInt(dim) or dim < 1 or dim > check.MAXDIM then
    check.error(('cat: invalid dimension %s (expected 1 to %d)'):format(tostring(dim), check.MAXDIM))
  end
  nd = math.max(nd, dim)
  local sz, allEmpty = {}, true
  for d = 1, nd do
    local s = extent(list[1], d)
    for i = 2, #list do
      local si = extent(list[i], d)
      if d == dim then s = s + si
      elseif s == 0 then s = si
      elseif si ~= 0 and si ~= s then
        check.error(('cat: inconsistent tensor sizes %s and %s in dimension %d'):format(
          check.sizestr(list[1]), check.sizestr(list[i]), d))
      end
    end
    sz[d] = s
    allEmpty = allEmpty and s == 0
  end
  if allEmpty then return res end
  -- every input must fill its slab of the result exactly
  local slab = 1
  for d = 1, nd do if d ~= dim then slab = slab * sz[d] end end
  for i = 1, #list do
    local t = list[i]
    if #t._sz > 0 and numel(t) ~= slab * extent(t, dim) then
      check.error(('cat: tensor %d (%s) does not fit the result (%s) along dimension %d'):format(
        i, check.sizestr(t), check.sizes(sz), dim))
    end
  end
  -- an input sharing the result's storage would be moved under the copy by the resize
  local inputs = {}
  for i = 1, #list do
    local t = list[i]
    inputs[i] = (t == res or (t._st and t._st == res._st)) and t:clone() or t
  end
  res:resize(sz)
  local offset = 1
  for i = 1, #inputs do
    local t = inputs[i]
    if #t._sz > 0 then
      local n = extent(t, dim)
      res:narrow(dim, offset, n):copy(t)
      offset = offset + n
    end
  end
  return res
end

-- cat([res,] a, b [,dim]) or cat([res,] {a, b, ...} [,dim])
R.define('cat', function(a, b, c, d)
  local function isList(x) return type(x) == 'table' and not isTensor(x) end
  if isList(a) then return catList(nil, a, b) end
  if isTensor(a) and isList(b) then return catList(a, b, c) end
  if isTensor(a) and isTensor(b) and isTensor(c) then return catList(a, { b, c }, d) end
  if isTensor(a) and isTensor(b) then return catList(nil, { a, b }, c) end
  check.error('cat: expected ([res,] tensor, tensor [,dim]) or ([res,] {tensors} [,dim])')
end)

------------------------------------------------------------------------------------------------
-- split, chunk: narrowed views; an optional first argument is the table to fill

-- ([result,] x, count [,dim = 1]) of split and chunk, checked: the table to fill (emptied, or a
-- new one), x, count (a positive integer, `what`) and dim.
local function viewArgs(op, what, result, x, count, dim)
  if isTensor(result) or type(result) ~= 'table' then
    result, x, count, dim = {}, result, x, count
  else
    for k in pairs(result) do result[k] = nil end
  end
  check.tensorOf(op, x)
  dim = dim or 1
  check.dim(op, x, dim)
  if type(count) ~= 'number' or count < 1 or count ~= math.floor(count) then
    check.error(('%s: %s must be a positive integer, got %s'):format(op, what, tostring(count)))
  end
  return result, x, count, dim
end

-- Appends to result the views of x of size elements along dim (the last one shorter).
local function views(result, x, size, dim)
  local n = x._sz[dim]
  for first = 1, n, size do
    result[#result + 1] = x:narrow(dim, first, math.min(size, n - first + 1))
  end
  return result
end

-- split([result,] x, size [,dim = 1]): views of size elements along dim (the last one shorter).
local function split(...)
  return views(viewArgs('split', 'size', ...))
end

-- chunk([result,] x, n [,dim = 1]): n (or fewer) views of equal size along dim.
local function chunk(...)
  local result, x, n, dim = viewArgs('chunk', 'the number of chunks', ...)
  return views(result, x, math.max(math.ceil(x._sz[dim] / n), 1), dim)
end

for name, fn in pairs({ split = split, chunk = chunk }) do
  torch._method(name, fn)
  torch[name] = fn
end

------------------------------------------------------------------------------------------------
-- histc, bhistc: counts in nbins equal bins over [min, max] (min = max: the data's range)

-- The arguments after x: the bin count and the range to use (torch7's defaults and fallbacks).
local function histogramRange(op, x, nbins, lo, hi)
  nbins, lo, hi = nbins or 100, lo or 0, hi or 0
  if type(nbins) ~= 'number' or nbins < 1 or nbins ~= math.floor(nbins) then
    check.error(op .. ': the number of bins must be a positive integer, got ' .. tostring(nbins))
  end
  check.number(op, lo, 'min')
  check.number(op, hi, 'max')
  if x._dt.ctype == 'float' then   -- the bounds are elements of x's type, as in torch7
    lo, hi = tonumber(ffi.new('float', lo)), tonumber(ffi.new('float', hi))
  end
  if lo == hi and numel(x) > 0 then lo, hi = backend.of(x).minmax(x) end
  if lo == hi then lo, hi = lo - 1, hi + 1 end
  return nbins, lo, hi
end

-- histc([res,] x [,nbins = 100] [,min = 0] [,max = 0])
R.define('histc', function(...)
  local res, x, nbins, lo, hi = R.args1('histc', ...)
  R.floating('histc', x)
  nbins, lo, hi = histogramRange('histc', x, nbins, lo, hi)
  res = R.result('histc', res, x)
  local counts = torch.DoubleTensor(nbins):zero()
  if numel(x) > 0 then backend.of(x).histc(counts, x, lo, hi) end
  return res:resize(nbins):copy(counts)
end)

-- bhistc([res,] x [,nbins] [,min] [,max]): one histogram per row of the 2D x.
R.define('bhistc', function(...)
  local res, x, nbins, lo, hi = R.args1('bhistc', ...)
  R.floating('bhistc', x)
  if #x._sz ~= 2 then check.error('bhistc: expected a 2D tensor, got ' .. check.sizestr(x)) end
  nbins, lo, hi = histogramRange('bhistc', x, nbins, lo, hi)
  res = R.result('bhistc', res, x)
  local rows = x._sz[1]
  local counts = torch.DoubleTensor(rows, nbins):zero()
  if numel(x) > 0 then backend.of(x).histc(counts, x, lo, hi) end
  return res:resize(rows, nbins):copy(counts)
end)
