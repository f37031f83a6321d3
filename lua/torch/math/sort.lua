-- Sorting along a dimension, torch7 style: sort topk kthvalue median mode. Each returns values
-- and a LongTensor of 1-based positions along the dimension (default: the last one).
-- Slices are sorted stably (equal values keep their order; torch7 leaves ties unspecified) and
-- NaN counts as larger than every number.
local ffi = require 'ffi'
local torch = require 'torch.env'
local check = require 'torch.check'
local apply = require 'torch.backend.cpu.apply'
local R = require 'torch.math.reduce'

local numel = apply.numel

-- `before(a, b)`: a goes strictly before b.
local BEFORE = {
  [false] = 'a < b or (b ~= b and a == a)',   -- ascending, NaN last
  [true] = 'a > b or (a ~= a and b == b)',    -- descending, NaN first
}

-- A stable merge sort of values v with their positions ix (n of each), using scratch arrays of
-- the same size; insertion sort makes the first runs. Returns the arrays holding the result.
local function sorterSource(descending)
  return ([[
local min = math.min
local function before(a, b) return %s end
return function(v, ix, tv, ti, n)
  local RUN = 16
  for lo = 0, n - 1, RUN do
    local hi = min(lo + RUN, n) - 1
    for i = lo + 1, hi do
      local a, ai = v[i], ix[i]
      local j = i - 1
      while j >= lo do
        local b = v[j]
        if not before(a, b) then break end
        v[j + 1] = b; ix[j + 1] = ix[j]
        j = j - 1
      end
      v[j + 1] = a; ix[j + 1] = ai
    end
  end
  local width = RUN
  while width < n do
    for lo = 0, n - 1, 2 * width do
      local mid, hi = min(lo + width, n), min(lo + 2 * width, n)
      local i, j, k = lo, mid, lo
      while i < mid and j < hi do
        local a, b = v[i], v[j]
        if before(b, a) then tv[k] = b; ti[k] = ix[j]; j = j + 1
        else tv[k] = a; ti[k] = ix[i]; i = i + 1 end
        k = k + 1
      end
      while i < mid do tv[k] = v[i]; ti[k] = ix[i]; i = i + 1; k = k + 1 end
      while j < hi do tv[k] = v[j]; ti[k] = ix[j]; j = j + 1; k = k + 1 end
    end
    v, ix, tv, ti = tv, ti, v, ix
    width = width * 2
  end
  return v, ix
end]]):format(BEFORE[descending])
end
local SORTERS = { [false] = apply.perType('sort', sorterSource(false)), [true] = apply.perType('sort', sorterSource(true)) }

-- Sorts each slice of x along dim and calls emit(vals, pos, o1, o2) with the sorted values, their
-- 0-based positions in the slice and the offsets of the slice in outs[1], outs[2].
local function eachSorted(x, dim, descending, outs, emit)
  if numel(x) == 0 then return end
  local n = x._sz[dim]
  local sorter = SORTERS[descending][x._dt]
  local vtype = ffi.typeof('$[?]', ffi.typeof(x._dt.ctype))
  local v, tv = vtype(n), vtype(n)
  local ix, ti = ffi.new('int32_t[?]', n), ffi.new('int32_t[?]', n)
  local xp, xs = x._st._ptr, x._str[dim]
  apply.slices({ x, outs[1], outs[2] }, dim, function(ox, o1, o2)
    for i = 0, n - 1 do v[i] = xp[ox + i * xs]; ix[i] = i end
    local sv, si = sorter(v, ix, tv, ti, n)
    emit(sv, si, o1, o2)
  end)
end

-- Writes the sorted entries first..first+count-1 into the values and indices tensors.
local function emitter(vals, inds, dim, first, count)
  local vp, vs, ip, is = vals._st and vals._st._ptr, vals._str[dim], inds._st and inds._st._ptr, inds._str[dim]
  return function(sv, si, ov, oi)
    for k = 0, count - 1 do
      vp[ov + k * vs] = sv[first + k]
      ip[oi + k * is] = si[first + k] + 1
    end
  end
end

local function withResults(op, vals, inds, x, ...)
  R.noHalf(op, x)
  vals, inds = R.result(op, vals, x), R.indexResult(op, inds)
  return vals, inds, R.apart(vals, R.apart(inds, x)), ...
end

-- ([vals, inds,] x, ...) -> the results (given, or new), x, the rest.
local function operands(op, ...) return withResults(op, R.args2(op, ...)) end

local function dimOf(op, x, dim)
  if #x._sz == 0 then check.error(op .. ': the tensor is empty (no dimensions)') end
  if dim == nil then dim = #x._sz end
  return check.dim(op, x, dim)
end

-- dimOf, for ops that need an element along dim.
local function filledDimOf(op, x, dim)
  dim = dimOf(op, x, dim)
  if x._sz[dim] == 0 then check.error(('%s: dimension %d has size 0'):format(op, dim)) end
  return dim
end

local function checkK(op, x, dim, k)
  check.number(op, k, 'k')
  local n = x._sz[dim]
  if k < 1 or k > n or k ~= math.floor(k) then
    check.error(('%s: k = %s out of range for dimension %d of size %d'):format(op, tostring(k), dim, n))
  end
end

-- sort([vals, inds,] x [,dim] [,descending])
R.define('sort', function(...)
  local vals, inds, x, dim, descending = operands('sort', ...)
  if type(dim) == 'boolean' then dim, descending = nil, dim end
  dim = dimOf('sort', x, dim)
  vals:resize(x:size())
  inds:resize(x:size())
  eachSorted(x, dim, descending == true, { vals, inds }, emitter(vals, inds, dim, 0, x._sz[dim]))
  return vals, inds
end)

-- topk([vals, inds,] x [,k = 1] [,dim] [,largest = false] [,sorted]): the k smallest (or largest)
-- along dim. They always come sorted (smallest or largest first).
R.define('topk', function(...)
  local vals, inds, x, k, dim, largest = operands('topk', ...)
  if type(k) == 'boolean' then k, dim, largest = 1, nil, k
  elseif type(dim) == 'boolean' then dim, largest = nil, dim end
  k = k or 1
  dim = dimOf('topk', x, dim)
  checkK('topk', x, dim, k)
  vals:resize(R.sizesWith(x, dim, k))
  inds:resize(R.sizesWith(x, dim, k))
  eachSorted(x, dim, largest == true, { vals, inds }, emitter(vals, inds, dim, 0, k))
  return vals, inds
end)

-- The k-th smallest along dim (size 1 there) and its position.
local function kth(vals, inds, x, k, dim)
  vals:resize(R.sizesWith(x, dim, 1))
  inds:resize(R.sizesWith(x, dim, 1))
  eachSorted(x, dim, false, { vals, inds }, emitter(vals, inds, dim, k - 1, 1))
  return vals, inds
end

-- kthvalue([vals, inds,] x, k [,dim])
R.define('kthvalue', function(...)
  local vals, inds, x, k, dim = operands('kthvalue', ...)
  dim = dimOf('kthvalue', x, dim)
  checkK('kthvalue', x, dim, k)
  return kth(vals, inds, x, k, dim)
end)

-- median([vals, inds,] x [,dim]): the middle element, the lower one for an even count.
R.define('median', function(...)
  local vals, inds, x, dim = operands('median', ...)
  dim = filledDimOf('median', x, dim)
  return kth(vals, inds, x, math.floor((x._sz[dim] - 1) / 2) + 1, dim)
end)

-- mode([vals, inds,] x [,dim]): the most frequent value (the smallest among equally frequent
-- ones) and the position of its last occurrence.
R.define('mode', function(...)
  local vals, inds, x, dim = operands('mode', ...)
  dim = filledDimOf('mode', x, dim)
  local n = x._sz[dim]
  vals:resize(R.sizesWith(x, dim, 1))
  inds:resize(R.sizesWith(x, dim, 1))
  local vp, ip = vals._st and vals._st._ptr, inds._st and inds._st._ptr
  eachSorted(x, dim, false, { vals, inds }, function(sv, si, ov, oi)
    local best, bestAt, run = 0, 0, 0
    for i = 0, n - 1 do
      run = run + 1
      if i == n - 1 or sv[i] ~= sv[i + 1] then
        if run > best then best, bestAt = run, i end
        run = 0
      end
    end
    vp[ov] = sv[bestAt]
    ip[oi] = si[bestAt] + 1
  end)
  return vals, inds
end)
