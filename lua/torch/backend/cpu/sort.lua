-- The CPU sorts behind math/sort.lua's front end, registered as the ops sort, topk, kthvalue and
-- mode (lua/torch/README.md, "The front end and the op table"); operands arrive checked, results
-- sized. Slices are sorted stably (equal values keep their order; torch7 leaves ties unspecified)
-- and NaN counts as larger than every number.
local ffi = require 'ffi'
local apply = require 'torch.backend.cpu.apply'

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

-- The mode of each slice: the most frequent value (the smallest among equally frequent ones)
-- and the position of its last occurrence.
local function mode(vals, inds, x, dim)
  local n = x._sz[dim]
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
end

require('torch.backend').register('cpu', {
  sort = function(vals, inds, x, dim, descending)
    eachSorted(x, dim, descending, { vals, inds }, emitter(vals, inds, dim, 0, x._sz[dim]))
  end,
  topk = function(vals, inds, x, k, dim, largest)
    eachSorted(x, dim, largest, { vals, inds }, emitter(vals, inds, dim, 0, k))
  end,
  kthvalue = function(vals, inds, x, k, dim)
    eachSorted(x, dim, false, { vals, inds }, emitter(vals, inds, dim, k - 1, 1))
  end,
  mode = mode,
})
