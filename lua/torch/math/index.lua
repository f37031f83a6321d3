-- Indexing by masks and index vectors, torch7 style: maskedFill maskedSelect maskedCopy (ByteTensor
-- masks of 0 and 1), index indexCopy indexAdd indexFill (1-D LongTensor of 1-based indices),
-- gather scatter, nonzero. Every index and mask is checked before anything is written.
local ffi = require 'ffi'
local torch = require 'torch.env'
local check = require 'torch.check'
local apply = require 'torch.backend.cpu.apply'
local R = require 'torch.math.reduce'

local isTensor, numel = torch.isTensor, apply.numel

------------------------------------------------------------------------------------------------
-- checks

local function checkMask(op, t, mask)
  check.tensorOf(op, mask, 'mask')
  if mask._dt.name ~= 'Byte' then
    check.error(('%s: the mask must be a torch.ByteTensor, got %s'):format(op, torch.typename(mask)))
  end
  check.sameElements(op, t, mask)
  if numel(mask) > 0 and R.extremeAll(op, mask, 'max') > 1 then
    check.error(op .. ': the mask can hold 0 and 1 only')
  end
end

-- All elements of the LongTensor idx lie in [1, size] (size of dimension dim).
local function checkRange(op, idx, dim, size)
  if numel(idx) == 0 then return end
  local lo, hi = R.extremeAll(op, idx, 'min'), R.extremeAll(op, idx, 'max')
  if lo < 1 or hi > size then
    check.error(('%s: index %d out of range for dimension %d of size %d'):format(
      op, lo < 1 and lo or hi, dim, size))
  end
end

-- A 1-D LongTensor of indices into dimension dim of t.
local function checkIndexVector(op, idx, t, dim)
  R.long(op, idx, 'the index')
  if #idx._sz ~= 1 then
    check.error(('%s: the index must be a vector (1D), got %s'):format(op, check.sizestr(idx)))
  end
  checkRange(op, idx, dim, t._sz[dim])
end

-- The number of elements in one slice of t along dim.
local function sliceElements(t, dim)
  local n = 1
  for d = 1, #t._sz do if d ~= dim then n = n * t._sz[d] end end
  return n
end

-- dst and src slices along dim match element for element; n indices pick n slices of src.
local function checkSlices(op, dst, dim, idx, src)
  check.tensorOf(op, src, 'source')
  check.sameType(op, dst, src)
  check.dim(op, src, dim)
  if src._sz[dim] ~= idx._sz[1] then
    check.error(('%s: %d indices but the source has size %d in dimension %d'):format(
      op, idx._sz[1], src._sz[dim], dim))
  end
  if sliceElements(dst, dim) ~= sliceElements(src, dim) then
    check.error(('%s: slices of the destination (%s) and the source (%s) along dimension %d differ in size'):format(
      op, check.sizestr(dst), check.sizestr(src), dim))
  end
end

-- Calls fn(i, k) for i = 1..n and the index k = idx[i].
local function eachIndex(idx, fn)
  local p, s = idx._st and idx._st._ptr, idx._str[1]
  local o = idx._off
  for i = 1, idx._sz[1] do
    fn(i, tonumber(p[o]))
    o = o + s
  end
end

------------------------------------------------------------------------------------------------
-- masks

torch._method('maskedFill', function(t, mask, value)
  R.noHalf('maskedFill', t)
  checkMask('maskedFill', t, mask)
  check.number('maskedFill', value, 'value')
  R.kernel(2, 'if $2 ~= 0 then $1 = v1 end')(t, mask, value)
  return t
end)

-- src:maskedSelect(mask) -> a new 1-D tensor; res:maskedSelect(src, mask) -> res.
-- The counter lives in a one-element array (v2) so the walk may span calls.
torch._method('maskedSelect', function(a, b, c)
  local res, src, mask = nil, a, b
  if c ~= nil then res, src, mask = a, b, c end
  check.tensorOf('maskedSelect', src, 'source')
  R.noHalf('maskedSelect', src)
  checkMask('maskedSelect', src, mask)
  res = R.result('maskedSelect', res, src)
  src, mask = R.apart(res, src), R.apart(res, mask)
  res:resize(R.foldAll(mask, R.SUM))
  if numel(res) > 0 then
    R.kernel(2, 'if $2 ~= 0 then v1[v2[0] * v3] = $1; v2[0] = v2[0] + 1 end')(
      src, mask, res._st._ptr + res._off, ffi.new('int64_t[1]'), res._str[1])
  end
  return res
end)

-- Elements where mask is 1 take the next elements of src, in order.
torch._method('maskedCopy', function(t, mask, src)
  R.noHalf('maskedCopy', t)
  checkMask('maskedCopy', t, mask)
  check.tensorOf('maskedCopy', src, 'source')
  check.sameType('maskedCopy', t, src)
  local ones = R.foldAll(mask, R.SUM)
  if ones > numel(src) then
    check.error(('maskedCopy: the mask has %d ones but the source only %d elements'):format(ones, numel(src)))
  end
  if ones > 0 then
    src = src:contiguous()
    R.kernel(2, 'if $2 ~= 0 then $1 = v1[v2[0]]; v2[0] = v2[0] + 1 end')(
      t, mask, src._st._ptr + src._off, ffi.new('int64_t[1]'))
  end
  return t
end)

------------------------------------------------------------------------------------------------
-- index vectors

-- Rows of dim 1 as whole blocks of memory, when both sides are contiguous.
local function rowCopy(dst, src)
  return apply.isContiguous(dst) and apply.isContiguous(src) and dst._st and src._st
end

-- For each i and k = idx[i]: slice i of dst = slice k of src (gather: index), or slice k of dst =
-- slice i of src (indexCopy), or slice k of dst += slice i of src (add: indexAdd). Vectors go
-- element by element, contiguous copies along dim 1 by blocks of memory, the rest by views.
local function moveSlices(dst, src, dim, idx, gather, add)
  -- fn(slice of dst, slice of src) for each index
  local function each(fn) eachIndex(idx, gather and fn or function(i, k) fn(k, i) end) end
  if #dst._sz == 1 then
    local dp, ds, sp, ss = dst._st._ptr + dst._off, dst._str[1], src._st._ptr + src._off, src._str[dim]
    if add then each(function(a, b) local q = (a - 1) * ds; dp[q] = dp[q] + sp[(b - 1) * ss] end)
    else each(function(a, b) dp[(a - 1) * ds] = sp[(b - 1) * ss] end) end
  elseif dim == 1 and not add and rowCopy(dst, src) then
    local row = numel(dst) / dst._sz[1]
    local bytes, dp, sp = row * dst._dt.size, dst._st._ptr + dst._off, src._st._ptr + src._off
    each(function(a, b) ffi.copy(dp + (a - 1) * row, sp + (b - 1) * row, bytes) end)
  else
    local addTo = R.kernel(2, '$1 = $1 + $2')
    each(function(a, b)
      local to, from = dst:narrow(dim, a, 1), src:narrow(dim, b, 1)
      if add then addTo(to, from) else to:copy(from) end
    end)
  end
end

-- x:index(dim, idx) -> new tensor; res:index(src, dim, idx) -> res. Slices idx[i] of src.
torch._method('index', function(a, b, c, d)
  local res, src, dim, idx = nil, a, b, c
  if isTensor(b) then res, src, dim, idx = a, b, c, d end
  check.tensorOf('index', src, 'source')
  R.noHalf('index', src)
  if #src._sz == 0 then check.error('index: the source tensor is empty') end
  check.dim('index', src, dim)
  checkIndexVector('index', idx, src, dim)
  res = R.result('index', res, src)
  src, idx = R.apart(res, src), R.apart(res, idx)
  res:resize(R.sizesWith(src, dim, idx._sz[1]))
  if numel(res) > 0 then moveSlices(res, src, dim, idx, true, false) end
  return res
end)

-- t:indexCopy(dim, idx, src): slice idx[i] of t = slice i of src.
-- t:indexAdd(dim, idx, src): slice idx[i] of t += slice i of src (repeated indices add up).
for name, add in pairs({ indexCopy = false, indexAdd = true }) do
  torch._method(name, function(t, dim, idx, src)
    R.noHalf(name, t)
    check.dim(name, t, dim)
    checkIndexVector(name, idx, t, dim)
    checkSlices(name, t, dim, idx, src)
    if numel(t) > 0 and numel(src) > 0 then moveSlices(t, src, dim, idx, false, add) end
    return t
  end)
end

-- t:indexFill(dim, idx, value): slices idx[i] of t = value.
torch._method('indexFill', function(t, dim, idx, value)
  R.noHalf('indexFill', t)
  check.dim('indexFill', t, dim)
  checkIndexVector('indexFill', idx, t, dim)
  check.number('indexFill', value, 'value')
  if numel(t) == 0 then return t end
  if #t._sz == 1 then
    local tp, ts = t._st._ptr + t._off, t._str[1]
    eachIndex(idx, function(_, k) tp[(k - 1) * ts] = value end)
  else
    eachIndex(idx, function(_, k) t:narrow(dim, k, 1):fill(value) end)
  end
  return t
end)

------------------------------------------------------------------------------------------------
-- gather, scatter: an index tensor of the operand's dimension count picks positions along dim

-- a and b have the same dimension count and sizes except along dim.
local function checkAligned(op, a, b, dim, what)
  if #a._sz ~= #b._sz then
    check.error(('%s: %s must have %d dimensions, got %s'):format(op, what, #a._sz, check.sizestr(b)))
  end
  for d = 1, #a._sz do
    if d ~= dim and a._sz[d] ~= b._sz[d] then
      check.error(('%s: %s (%s) must match %s in every dimension but %d'):format(
        op, what, check.sizestr(b), check.sizestr(a), dim))
    end
  end
end

-- gather([res,] src, dim, idx): res (sizes of idx) at position p = src at p with p[dim] = idx[p].
R.define('gather', function(...)
  local res, src, dim, idx = R.args1('gather', ...)
  R.noHalf('gather', src)
  check.dim('gather', src, dim)
  R.long('gather', idx, 'the index')
  checkAligned('gather', src, idx, dim, 'the index')
  checkRange('gather', idx, dim, src._sz[dim])
  res = R.result('gather', res, src)
  src, idx = R.apart(res, src), R.apart(res, idx)
  res:resize(idx:size())
  if numel(res) == 0 then return res end
  local rp, sp, ip = res._st._ptr, src._st._ptr, idx._st._ptr
  local rs, ss, is, m = res._str[dim], src._str[dim], idx._str[dim], idx._sz[dim]
  apply.slices({ res, src, idx }, dim, function(ro, so, io)
    for i = 0, m - 1 do rp[ro + i * rs] = sp[so + (ip[io + i * is] - 1) * ss] end
  end)
  return res
end)

-- t:scatter(dim, idx, src | value): t at p with p[dim] = idx[q] takes src[q] (or value).
R.define('scatter', function(t, dim, idx, src)
  check.tensorOf('scatter', t, 'destination')
  R.noHalf('scatter', t)
  check.dim('scatter', t, dim)
  R.long('scatter', idx, 'the index')
  checkAligned('scatter', t, idx, dim, 'the index')
  checkRange('scatter', idx, dim, t._sz[dim])
  if isTensor(src) then
    check.sameType('scatter', t, src)
    checkAligned('scatter', idx, src, dim, 'the source')
    if src._sz[dim] < idx._sz[dim] then
      check.error(('scatter: the source (%s) is smaller than the index (%s) in dimension %d'):format(
        check.sizestr(src), check.sizestr(idx), dim))
    end
  else
    check.number('scatter', src, 'source value')
  end
  if numel(idx) == 0 then return t end
  local tp, ip = t._st._ptr, idx._st._ptr
  local ts, is, m = t._str[dim], idx._str[dim], idx._sz[dim]
  if isTensor(src) then
    local sp, ss = src._st._ptr, src._str[dim]
    apply.slices({ t, idx, src }, dim, function(to, io, so)
      for i = 0, m - 1 do tp[to + (ip[io + i * is] - 1) * ts] = sp[so + i * ss] end
    end)
  else
    apply.slices({ t, idx }, dim, function(to, io)
      for i = 0, m - 1 do tp[to + (ip[io + i * is] - 1) * ts] = src end
    end)
  end
  return t
end)

------------------------------------------------------------------------------------------------
-- nonzero([res,] x): a LongTensor N x dim of the 1-based subscripts of the non-zeros, row-major.

R.define('nonzero', function(...)
  local res, x = R.args1('nonzero', ...)
  R.noHalf('nonzero', x)
  res = R.indexResult('nonzero', res)
  x = R.apart(res, x)
  local nd = #x._sz
  local count = R.foldAll(x, R.NONZERO)
  res:resize(count, nd)
  if count == 0 then return res end
  local xp, s, m = x._st._ptr, x._str[nd], x._sz[nd]
  local rp, r1, r2 = res._st._ptr + res._off, res._str[1], res._str[2]
  local at = {}   -- subscripts of the current row of x (the dims before the last)
  for d = 1, nd - 1 do at[d] = 1 end
  local row = 0
  apply.slices({ x }, nd, function(o)
    for j = 0, m - 1 do
      if xp[o + j * s] ~= 0 then
        local q = row * r1
        for d = 1, nd - 1 do rp[q + (d - 1) * r2] = at[d] end
        rp[q + (nd - 1) * r2] = j + 1
        row = row + 1
      end
    end
    local d = nd - 1
    while d > 0 do
      if at[d] < x._sz[d] then at[d] = at[d] + 1; break end
      at[d] = 1
      d = d - 1
    end
  end)
  return res
end)
