-- The CPU kernels of the indexing ops (math/index.lua parses, checks and sizes; see the op list in
-- lua/torch/README.md). Indices are 1-based and already checked to be in range.
local ffi = require 'ffi'
local apply = require 'torch.backend.cpu.apply'
local backend = require 'torch.backend'

local numel, kernel, isContiguous = apply.numel, apply.kernel, apply.isContiguous

local fillWhere = kernel(2, 'if $2 ~= 0 then $1 = v1 end')
local addInto = kernel(2, '$1 = $1 + $2')
-- The counters live in one-element arrays (v2) so that the walk may span the kernel's runs.
local selectWhere = kernel(2, 'if $2 ~= 0 then v1[v2[0] * v3] = $1; v2[0] = v2[0] + 1 end')
local copyWhere = kernel(2, 'if $2 ~= 0 then $1 = v1[v2[0]]; v2[0] = v2[0] + 1 end')

-- The non-zeros among n elements from p at stride s. Integers of up to 32 bits count without a
-- branch (v | -v has its sign bit set unless v is 0): a branch on random masks mispredicts.
local COUNT = [[
local bor, rshift = bit.bor, bit.rshift
return function(p, n, s)
  local c0, c1, c2, c3, q = 0, 0, 0, 0, 0
  for _ = 1, n - n %% 4, 4 do
    local v = p[q]; c0 = c0 + %s
    v = p[q + s]; c1 = c1 + %s
    v = p[q + 2 * s]; c2 = c2 + %s
    v = p[q + 3 * s]; c3 = c3 + %s
    q = q + 4 * s
  end
  for _ = 1, n %% 4 do
    local v = p[q]; c0 = c0 + %s
    q = q + s
  end
  return c0 + c1 + c2 + c3
end]]
local countBits = apply.perType('count_nonzero', COUNT:gsub('%%s', 'rshift(bor(v, -v), 31)'):gsub('%%%%', '%%'))
local countBytes = apply.perType('count_nonzero', COUNT:gsub('%%s', 'rshift(v + 255, 8)'):gsub('%%%%', '%%'))
local countTests = apply.perType('count_nonzero', COUNT:gsub('%%s', '(v ~= 0 and 1 or 0)'):gsub('%%%%', '%%'))
local function countRunOf(dt)
  if dt.name == 'Byte' then return countBytes[dt] end
  if dt.integer and dt.size <= 4 then return countBits[dt] end
  return countTests[dt]
end

-- Calls fn(i, k) for i = 1..n and the index k = idx[i].
local function eachIndex(idx, fn)
  local p, s = idx._st._ptr, idx._str[1]
  local o = idx._off
  for i = 1, idx._sz[1] do
    fn(i, tonumber(p[o]))
    o = o + s
  end
end

-- Rows idx[i] of dst (contiguous, rows of m elements) += row i of src (contiguous), or = v (a
-- number, src nil); idx: n indices from ip at stride is. One loop for all rows: a view and a
-- kernel call per row cost more than a short row's elements.
local addRows = apply.perType('index_add rows', [[
return function(dp, sp, ip, is, n, m)
  for i = 0, n - 1 do
    local d, s = dp + (ip[i * is] - 1) * m, sp + i * m
    for j = 0, m - 1 do d[j] = d[j] + s[j] end
  end
end]])
local fillRows = apply.perType('index_fill rows', [[
return function(dp, v, ip, is, n, m)
  for i = 0, n - 1 do
    local d = dp + (ip[i * is] - 1) * m
    for j = 0, m - 1 do d[j] = v end
  end
end]])

-- Rows of dim 1 as whole blocks of memory, when both sides are contiguous.
local function rowCopy(dst, src)
  return isContiguous(dst) and isContiguous(src) and dst._st and src._st
end

-- For each i and k = idx[i]: slice i of dst = slice k of src (gather: index_select), or slice k
-- of dst = slice i of src (index_copy), or slice k of dst += slice i of src (add: index_add).
-- Vectors go element by element, contiguous copies along dim 1 by blocks of memory, the rest by
-- views.
local function moveSlices(dst, src, dim, idx, gather, add)
  -- fn(slice of dst, slice of src) for each index
  local function each(fn) eachIndex(idx, gather and fn or function(i, k) fn(k, i) end) end
  if #dst._sz == 1 then
    local dp, ds, sp, ss = dst._st._ptr + dst._off, dst._str[1], src._st._ptr + src._off, src._str[dim]
    if add then each(function(a, b) local q = (a - 1) * ds; dp[q] = dp[q] + sp[(b - 1) * ss] end)
    else each(function(a, b) dp[(a - 1) * ds] = sp[(b - 1) * ss] end) end
  elseif dim == 1 and rowCopy(dst, src) then
    local row = numel(dst) / dst._sz[1]
    local dp, sp = dst._st._ptr + dst._off, src._st._ptr + src._off
    if add then
      addRows[dst._dt](dp, sp, idx._st._ptr + idx._off, idx._str[1], idx._sz[1], row)
    else
      local bytes = row * dst._dt.size
      each(function(a, b) ffi.copy(dp + (a - 1) * row, sp + (b - 1) * row, bytes) end)
    end
  else
    each(function(a, b)
      local to, from = dst:narrow(dim, a, 1), src:narrow(dim, b, 1)
      if add then addInto(to, from) else to:copy(from) end
    end)
  end
end

local function countNonzero(a)
  if numel(a) == 0 then return 0 end
  local run, p = countRunOf(a._dt), a._st._ptr
  if isContiguous(a) then return run(p + a._off, numel(a), 1) end
  local nd, c = #a._sz, 0
  local m, s = a._sz[nd], a._str[nd]
  apply.slices({ a }, nd, function(o) c = c + run(p + o, m, s) end)
  return c
end

-- r (count x nd) = the 1-based subscripts of a's non-zeros, row-major.
local function nonzero(r, a)
  local nd = #a._sz
  local ap, s, m = a._st._ptr, a._str[nd], a._sz[nd]
  local rp, r1, r2 = r._st._ptr + r._off, r._str[1], r._str[2]
  local at = {}   -- subscripts of the current row of a (the dims before the last)
  for d = 1, nd - 1 do at[d] = 1 end
  local row = 0
  apply.slices({ a }, nd, function(o)
    for j = 0, m - 1 do
      if ap[o + j * s] ~= 0 then
        local q = row * r1
        for d = 1, nd - 1 do rp[q + (d - 1) * r2] = at[d] end
        rp[q + (nd - 1) * r2] = j + 1
        row = row + 1
      end
    end
    local d = nd - 1
    while d > 0 do
      if at[d] < a._sz[d] then at[d] = at[d] + 1; break end
      at[d] = 1
      d = d - 1
    end
  end)
end

backend.register('cpu', {
  index_select = function(r, a, dim, idx) moveSlices(r, a, dim, idx, true, false) end,
  index_copy = function(r, dim, idx, a) moveSlices(r, a, dim, idx, false, false) end,
  index_add = function(r, dim, idx, a) moveSlices(r, a, dim, idx, false, true) end,

  index_fill = function(r, dim, idx, v)
    if #r._sz == 1 then
      local rp, rs = r._st._ptr + r._off, r._str[1]
      eachIndex(idx, function(_, k) rp[(k - 1) * rs] = v end)
    elseif dim == 1 and isContiguous(r) then
      fillRows[r._dt](r._st._ptr + r._off, v, idx._st._ptr + idx._off, idx._str[1], idx._sz[1], numel(r) / r._sz[1])
    else
      eachIndex(idx, function(_, k) r:narrow(dim, k, 1):fill(v) end)
    end
  end,

  -- r at p = a at p with p[dim] = idx[p]
  gather = function(r, a, dim, idx)
    local rp, ap, ip = r._st._ptr, a._st._ptr, idx._st._ptr
    local rs, as, is, m = r._str[dim], a._str[dim], idx._str[dim], idx._sz[dim]
    apply.slices({ r, a, idx }, dim, function(ro, ao, io)
      for i = 0, m - 1 do rp[ro + i * rs] = ap[ao + (ip[io + i * is] - 1) * as] end
    end)
  end,

  -- r at p with p[dim] = idx[q] takes a[q] (a tensor) or a (a number)
  scatter = function(r, dim, idx, a)
    local rp, ip = r._st._ptr, idx._st._ptr
    local rs, is, m = r._str[dim], idx._str[dim], idx._sz[dim]
    if type(a) == 'number' then
      apply.slices({ r, idx }, dim, function(ro, io)
        for i = 0, m - 1 do rp[ro + (ip[io + i * is] - 1) * rs] = a end
      end)
    else
      local ap, as = a._st._ptr, a._str[dim]
      apply.slices({ r, idx, a }, dim, function(ro, io, ao)
        for i = 0, m - 1 do rp[ro + (ip[io + i * is] - 1) * rs] = ap[ao + i * as] end
      end)
    end
  end,

  masked_fill = function(r, mask, v) fillWhere(r, mask, v) end,

  -- the elements of r where mask is 1 take a's first elements, in order
  masked_copy = function(r, mask, a)
    a = a:contiguous()
    copyWhere(r, mask, a._st._ptr + a._off, ffi.new('int64_t[1]'))
  end,

  masked_select = function(r, a, mask)
    selectWhere(a, mask, r._st._ptr + r._off, ffi.new('int64_t[1]'), r._str[1])
  end,

  count_nonzero = countNonzero,
  nonzero = nonzero,
})
